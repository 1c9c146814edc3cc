"""Admission rules: which of the nodes with room a pod may take, apart from how a policy
scores them — one definition that any policy can be given.

A rule narrows the feasible nodes (``admit``) and may learn from the pods seen so far
(``observe``, told of every decision after it is made, never of pods still to come). A
policy applies rules by being wrapped in :class:`Admitted`; ``stowage`` applies
``reserve-gpu-cpu`` itself when its ``reserve_gpu_cpu`` argument is on, through the same
class. Comparing two policies is only like for like when the same rules are in force on
both sides (:func:`in_force` names them), because a rule that refuses CPU-only pods can
buy GPU allocation with them.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import ClassVar, Final

import numpy as np
import numpy.typing as npt

from common.errors import ConfigError
from coordinator.scoring.base import Policy
from coordinator.scoring.workload import DEFAULT_CPU_M_PER_GPU_MILLI, WorkloadModel
from coordinator.state.cluster import MILLI_PER_GPU, ClusterState, Placement
from coordinator.state.podrequest import PodRequest


class AdmissionRule(abc.ABC):
    """One admission rule; ``name`` is how the command line and the reports call it."""

    name: ClassVar[str]

    @abc.abstractmethod
    def admit(
        self, state: ClusterState, pod: PodRequest, feasible: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.bool_]:
        """The nodes of ``feasible`` the rule lets ``pod`` take."""

    def observe(self, pod: PodRequest) -> None:
        """Told of every pod once it has been decided (placed or not)."""
        return None


MIN_GPU_PODS: Final = 64
"""GPU pods seen before the learnt ρ replaces the prior: a handful of pods (the first one
alone might be a 64-core training job) would otherwise make ρ, and with it the whole
reservation, swing from refusing every CPU-only pod to refusing none."""


class ReserveGpuCpu(AdmissionRule):
    """Keep a CPU-only pod off a node where it would leave the node's whole free GPUs
    without the CPU that GPU pods bring along: ρ millicores per milli-GPU, learnt from the
    GPU pods seen (the prior of :mod:`coordinator.scoring.workload` until
    :data:`MIN_GPU_PODS` of them).

    While CPU is plentiful this changes nothing (the pod goes where CPU is spare); when the
    cluster runs out of CPU, CPU-only pods wait instead of stranding GPUs — the intent of
    tainting GPU nodes, applied only where it matters. The price is CPU-only pods refused
    next to free CPU, which is why every report shows it next to the GPU gain.
    """

    name = "reserve-gpu-cpu"

    def __init__(self) -> None:
        self.model = WorkloadModel()
        self.gpu_pods = 0

    @property
    def rho(self) -> float:
        """CPU millicores to keep per whole free milli-GPU."""
        if self.gpu_pods < MIN_GPU_PODS:
            return DEFAULT_CPU_M_PER_GPU_MILLI
        return self.model.cpu_m_per_gpu_milli

    def admit(
        self, state: ClusterState, pod: PodRequest, feasible: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.bool_]:
        if pod.gpus:
            return feasible
        whole_free = (state.gpu_free == MILLI_PER_GPU).sum(axis=1) * MILLI_PER_GPU
        keeps_cpu = state.cpu_free - pod.cpu_m >= self.rho * whole_free
        admitted: npt.NDArray[np.bool_] = feasible & keeps_cpu
        return admitted

    def observe(self, pod: PodRequest) -> None:
        self.model.observe(pod)
        self.gpu_pods += bool(pod.gpus)


RULES: Final[Mapping[str, Callable[[], AdmissionRule]]] = {
    ReserveGpuCpu.name: ReserveGpuCpu,
}


def build_rules(names: Iterable[str]) -> tuple[AdmissionRule, ...]:
    """Fresh rules by name, each once, in the order given; an unknown name is a
    :class:`ConfigError` listing the known ones."""
    rules: list[AdmissionRule] = []
    for name in dict.fromkeys(names):
        make = RULES.get(name)
        if make is None:
            raise ConfigError(f"unknown admission rule {name!r}; known: {', '.join(RULES)}")
        rules.append(make())
    return tuple(rules)


def narrow(
    rules: Sequence[AdmissionRule],
    state: ClusterState,
    pod: PodRequest,
    feasible: npt.NDArray[np.bool_],
) -> npt.NDArray[np.bool_]:
    """``feasible`` narrowed by every rule in turn."""
    for rule in rules:
        feasible = rule.admit(state, pod, feasible)
    return feasible


def in_force(policy: Policy) -> tuple[str, ...]:
    """The names of the admission rules a built policy applies, sorted: its own (a policy
    that applies rules lists them in an ``admission`` attribute) and those wrapped on."""
    own: Sequence[AdmissionRule] = getattr(policy, "admission", ())
    return tuple(sorted({rule.name for rule in own}))


class Admitted(Policy):
    """``policy`` with admission rules on top: the policy scores and picks devices as it
    would alone, among the nodes every rule (its own included) admits."""

    def __init__(self, policy: Policy, rules: Sequence[AdmissionRule]) -> None:
        self.policy = policy
        applied = set(in_force(policy))
        self.rules = tuple(r for r in rules if r.name not in applied)
        self.admission: tuple[AdmissionRule, ...] = (
            *getattr(policy, "admission", ()),
            *self.rules,
        )

    # The wrapped policy's name and epoch, read through: Policy declares them as a class
    # constant and a plain attribute, which a read-only property cannot override in types.
    @property
    def name(self) -> str:  # type: ignore[override]  # see above
        return self.policy.name

    @property
    def epoch(self) -> int:  # type: ignore[override]  # see above
        return self.policy.epoch

    def shape_key(self, pod: PodRequest) -> Hashable | None:
        return self.policy.shape_key(pod)

    def admit(
        self, state: ClusterState, pod: PodRequest, feasible: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.bool_]:
        return narrow(self.rules, state, pod, self.policy.admit(state, pod, feasible))

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        return self.policy.score(state, i, pod)

    def score_nodes(
        self, state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        return self.policy.score_nodes(state, pod, nodes)

    def devices(self, state: ClusterState, i: int, pod: PodRequest) -> tuple[int, ...]:
        return self.policy.devices(state, i, pod)

    def explain(self, state: ClusterState, i: int, pod: PodRequest) -> Mapping[str, float]:
        return self.policy.explain(state, i, pod)

    def observe(self, state: ClusterState, pod: PodRequest, placement: Placement | None) -> None:
        for rule in self.rules:
            rule.observe(pod)
        self.policy.observe(state, pod, placement)


def with_rules(policy: Policy, names: Iterable[str]) -> Policy:
    """``policy`` applying the named rules too; the policy itself when there are none."""
    rules = build_rules(names)
    return Admitted(policy, rules) if rules else policy
