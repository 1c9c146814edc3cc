"""Why a node cannot take a pod, in words a human reads in ``kubectl describe pod``.

Capacity first (what every scheduler checks, against true allocatable memory where an
agent measured it), then what only Stowage sees, each switchable in the settings:

* memory contiguity — a pod needing contiguous memory skips nodes whose free memory in
  2 MiB blocks is below the threshold or its need;
* real load — batch pods skip nodes whose measured CPU use or CPU pressure is above the
  threshold;
* NUMA — a pod kubelet will pin to one NUMA node skips nodes where no NUMA node can hold
  it (kubelet would reject it at admission, after the scheduler bound it);
* GPU health — a GPU pod skips nodes without enough healthy GPUs for it, and then nodes
  whose healthy GPUs lack the room (:mod:`coordinator.scoring.gpuhealth`);
* I/O — a pod marked I/O-heavy skips nodes whose disks are saturated
  (:mod:`coordinator.scoring.iocontention`).
* tenancy — with a rule set, a pod skips nodes where no NUMA node that could hold it is
  free of tenants its rule keeps it apart from (:mod:`coordinator.scoring.tenancy`).

A node with no fresh report has unknown signals: only capacity applies to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from coordinator.config import SignalSettings
from coordinator.scoring import capacity, gpuhealth, iocontention, tenancy
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest
from coordinator.state.signals import ALIGNING_POLICIES

MIB: Final = 2**20


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: str
    unresolvable: bool
    """True when evicting pods would not help (wrong GPU model, NUMA node too small)."""


def rejections(
    state: ClusterState,
    pod: PodRequest,
    nodes: npt.NDArray[np.int64],
    settings: SignalSettings,
) -> dict[int, Rejection]:
    """Node index → why it cannot take the pod, for the nodes in ``nodes`` that cannot (in
    the order of ``nodes``)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    found = refusals(state, pod, nodes, settings)
    at = np.flatnonzero(found.refused)
    return {
        i: Rejection(reason, unresolvable)
        for i, reason, unresolvable in zip(
            nodes[at].tolist(),
            found.reasons[at].tolist(),
            found.unresolvable[at].tolist(),
            strict=True,
        )
    }


@dataclass(frozen=True, slots=True)
class Refusals:
    """Per node of those judged, in their order: whether it cannot take the pod, and why."""

    refused: npt.NDArray[np.bool_]
    reasons: npt.NDArray[np.object_]
    """The reason (a str) where refused, None elsewhere."""
    unresolvable: npt.NDArray[np.bool_]
    """Refused, and evicting pods would not help."""


def refusals(
    state: ClusterState,
    pod: PodRequest,
    nodes: npt.NDArray[np.int64],
    settings: SignalSettings,
) -> Refusals:
    """:func:`rejections` as arrays over ``nodes``, for judging thousands of nodes at once.

    Every check runs over all the nodes at once; a node's reason is that of the first
    check it fails, in the order above. A GPU pod in a big cluster fails most nodes on the
    same few counts, so each reason is written once per distinct value it names (a GPU
    count, a model, the free CPU …) and shared by the nodes naming it."""
    nodes = np.asarray(nodes, dtype=np.int64)
    checks = (
        _capacity(state, pod, nodes)
        + _live(state, pod, nodes, settings)
        + _healthy_room(state, pod, nodes, settings)
    )
    first = np.zeros(len(nodes), dtype=np.int64)  # 0: passes; k: fails check k first
    for k in range(len(checks), 0, -1):
        first[checks[k - 1].fails] = k
    reasons = np.empty(len(nodes), dtype=object)
    unresolvable = np.zeros(len(nodes), dtype=bool)
    for k, check in enumerate(checks, start=1):
        at = np.flatnonzero(first == k)
        if len(at):
            named = check.named[at].tolist()
            memo = {value: check.reason(value) for value in set(named)}
            reasons[at] = np.fromiter(map(memo.__getitem__, named), dtype=object, count=len(at))
            unresolvable[at] = check.unresolvable
    return Refusals(refused=first > 0, reasons=reasons, unresolvable=unresolvable)


def signal_refusals(
    state: ClusterState,
    pod: PodRequest,
    nodes: npt.NDArray[np.int64],
    settings: SignalSettings,
) -> npt.NDArray[np.bool_]:
    """Per node of ``nodes``, whether what only Stowage sees (contiguity, real load, NUMA,
    too few healthy GPUs) refuses the pod there. No eviction changes these signals, so the
    eviction planner tries no set on such a node: each would be refused (a node short of
    contiguous memory by its report made it judge 4,095 sets for nothing)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    refused = np.zeros(len(nodes), dtype=bool)
    for check in _live(state, pod, nodes, settings):
        refused |= check.fails
    return refused


@dataclass(frozen=True, slots=True)
class _Check:
    """One check over many nodes."""

    fails: npt.NDArray[np.bool_]
    named: npt.NDArray[Any]
    """Per node, the value its reason names (a plain number once read out)."""
    reason: Callable[[Any], str]
    """The reason naming a value."""
    unresolvable: bool = False


def _load_reason(label: str, threshold: float) -> Callable[[Any], str]:
    """The reason of one real-load check, bound to its label."""
    return lambda v: f"real load: {label} {v:.0f} % > {threshold:g} %"


def _capacity(state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64]) -> list[_Check]:
    """The capacity checks of :mod:`coordinator.scoring.capacity`, one by one with a reason
    each; a node fails one of them exactly when the engine finds it infeasible."""
    has = capacity.room(state, pod, nodes)
    checks = []
    if has.model_ok is not None and has.model_id is not None:
        wanted = ", ".join(sorted(pod.gpu_models))
        checks.append(
            _Check(
                ~has.model_ok[has.model_id],
                has.model_id,
                lambda m: f"GPU model {state.models[m] or 'none'} is not one of {wanted}",
                unresolvable=True,
            )
        )
    if has.gpu_count is not None and has.gpus_with_room is not None:
        checks.append(
            _Check(
                has.gpu_count < pod.gpus,
                has.gpu_count,
                lambda c: f"{c} GPUs on the node < {pod.gpus} requested",
                unresolvable=True,
            )
        )
        checks.append(
            _Check(
                has.gpus_with_room < pod.gpus,
                has.gpus_with_room,
                lambda r: f"{r} GPUs with {pod.gpu_milli} milli free < {pod.gpus} requested",
            )
        )
    checks.append(
        _Check(
            has.cpu_free < pod.cpu_m,
            has.cpu_free,
            lambda c: f"CPU {c}m free < {pod.cpu_m}m requested",
        )
    )
    checks.append(
        _Check(
            has.mem_free < pod.mem_b,
            has.mem_free,
            lambda m: f"memory {_mib(max(0, m))} free < {_mib(pod.mem_b)} requested",
        )
    )
    return checks


def _live(
    state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64], settings: SignalSettings
) -> list[_Check]:
    checks = []
    if pod.contiguous_b:
        need = pod.contiguous_b  # no less than the threshold (see kubeobjects.pod_request)
        checks.append(
            _Check(
                state.short_of_contiguous(nodes, need),
                state.contiguous_2mib_b[nodes],
                lambda c: f"memory contiguity {_mib(c)} < {_mib(need)} needed",
            )
        )
    if pod.batch:
        threshold = settings.cpu_utilization_threshold_pct
        for label, column in (
            ("CPU use", state.cpu_used_pct),
            ("CPU pressure", state.cpu_pressure_pct),
        ):
            value = column[nodes]
            checks.append(
                _Check(
                    value > threshold,  # NaN (not measured) compares False
                    value,
                    _load_reason(label, threshold),
                )
            )
    if settings.numa_alignment and pod.numa_aligned:
        largest = state.largest_numa_cpu_m[nodes]
        fails = (largest >= 0) & (largest < pod.cpu_m)  # -1: not measured
        at = np.flatnonzero(fails)
        fails[at] = [state.topology_policy[i] in ALIGNING_POLICIES for i in nodes[at].tolist()]
        checks.append(
            _Check(
                fails,
                nodes,
                lambda i: (
                    f"NUMA: no NUMA node holds {pod.cpu_m // 1000} CPUs"
                    f" (largest has {int(state.largest_numa_cpu_m[i]) // 1000});"
                    f" topology manager policy {state.topology_policy[i]}"
                ),
                unresolvable=True,
            )
        )
    few = gpuhealth.too_few(state, pod, nodes, settings.gpu_health)
    if few is not None:
        checks.append(_Check(few.fails, nodes, few.reason, unresolvable=True))
    busy_io = iocontention.saturated(state, pod, nodes, settings.io)
    if busy_io is not None:
        checks.append(_Check(busy_io[0], nodes, busy_io[1].__getitem__))
    tenants = tenancy.refused(state, pod, nodes, settings.tenancy)
    if tenants is not None:  # unresolvable: no pod is evicted to clear a NUMA node of a tenant
        checks.append(_Check(tenants[0], nodes, tenants[1].__getitem__, unresolvable=True))
    return checks


def _healthy_room(
    state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64], settings: SignalSettings
) -> list[_Check]:
    """Healthy GPUs there, but too few with room: evicting pods from them would help."""
    busy = gpuhealth.too_busy(state, pod, nodes, settings.gpu_health)
    return [] if busy is None else [_Check(busy.fails, nodes, busy.reason)]


def _mib(b: int) -> str:
    return f"{b // MIB} MiB"
