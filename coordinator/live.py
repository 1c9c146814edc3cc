"""The live cluster: Nodes and Pods from the API server, signals from agent reports, and
the scheduling decisions the extender endpoints serve — all over one :class:`ClusterState`.

Pods bound to a node take their requests from it; so do pods the extender just ranked
first (*assumed*) until the pod watch says where they were bound or ``assumed_ttl_s``
passes, so a burst of pods does not pile onto one node between two watch events. Adding or
removing a node rebuilds the state (rare); everything else updates it in place and bumps
only the changed node's version, so the engine rescoring stays incremental.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from common.clock import Clock
from common.schema import NodeReport
from coordinator.config import CoordinatorSettings
from coordinator.metrics import CoordinatorMetrics
from coordinator.scoring import livefilters, registry
from coordinator.scoring.base import PodRequest, Policy, best_fit_devices
from coordinator.scoring.engine import Engine
from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from coordinator.state.kubeobjects import ObjectError, node_spec, pod_request
from coordinator.state.reports import signals_of
from coordinator.state.signals import UNKNOWN, NodeSignals

log = logging.getLogger(__name__)

MAX_EXTENDER_SCORE = 10
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class Held:
    """What one pod holds on its node, exactly as taken, so it can be given back."""

    node: str
    request: PodRequest
    devices: tuple[int, ...]
    cpu_m: int
    mem_b: int
    assumed_until: float | None = None
    """Monotonic deadline for an assumed pod; None once the API says it is bound."""


@dataclass
class FilterResult:
    passing: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)


class LiveCluster:
    def __init__(
        self,
        settings: CoordinatorSettings,
        clock: Clock,
        metrics: CoordinatorMetrics,
        policy: Policy | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.policy = policy or registry.build_policy(settings.policy.name, settings.policy.args)
        self.specs: dict[str, NodeSpec] = {}
        self.held: dict[str, Held] = {}  # pod uid -> what it holds
        self.signals: dict[str, NodeSignals] = {}
        self.reports: dict[str, NodeReport] = {}
        self.pods: dict[str, PodRequest] = {}
        """Every non-terminal pod the API server has, bound or pending, by ``ns/name``."""
        self.state: ClusterState | None = None
        self.engine: Engine | None = None

    # ------------------------------------------------------------------ nodes

    def upsert_node(self, node: Mapping[str, Any]) -> None:
        self.upsert_nodes([node])

    def upsert_nodes(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        """Several nodes at once: one rebuild however many changed (all parsed first, so a
        bad one changes nothing)."""
        specs = [node_spec(n) for n in nodes]
        changed = [s for s in specs if self.specs.get(s.name) != s]
        if changed:
            self.specs.update((s.name, s) for s in changed)
            self._rebuild()

    def remove_node(self, name: str) -> None:
        if self.specs.pop(name, None) is not None:
            self.signals.pop(name, None)
            self.reports.pop(name, None)
            for uid in [u for u, h in self.held.items() if h.node == name]:
                del self.held[uid]
            self._rebuild()

    def replace_nodes(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        """A full relist: exactly these nodes, from now on."""
        specs = {}
        for node in nodes:
            try:
                spec = node_spec(node)
            except ObjectError as e:
                log.warning("ignoring node: %s", e)
                continue
            specs[spec.name] = spec
        if specs != self.specs:
            self.specs = specs
            self.held = {u: h for u, h in self.held.items() if h.node in specs}
            self._rebuild()

    # ------------------------------------------------------------------- pods

    def upsert_pod(self, pod: Mapping[str, Any]) -> None:
        """A pod as the API server has it: bound pods hold resources, others none."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        node = (pod.get("spec") or {}).get("nodeName")
        current = self.held.get(uid)
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            self.pods.pop(key, None)
            if current is not None:
                self._release(uid)
            return
        try:
            request = pod_request(pod, self.settings.signals.contiguity_threshold_b)
        except ObjectError as e:
            log.warning("ignoring pod: %s", e)
            return
        if key not in self.pods:  # first sight: a policy that learns the workload learns it
            self.policy.observe(self.state, request, None)  # type: ignore[arg-type]
        self.pods[key] = request
        if not node or node not in self.specs:
            if current is not None and current.assumed_until is None:
                self._release(uid)
            return
        if current is not None:
            if current.node == node and current.assumed_until is None:
                return  # already counted where it is
            self._release(uid)
        self._hold(uid, node, request, assumed_until=None)

    def remove_pod(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        self.pods.pop(f"{meta.get('namespace') or 'default'}/{meta.get('name')}", None)
        uid = meta.get("uid")
        if uid in self.held:
            self._release(uid)

    def replace_pods(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """A full relist: forget bound pods the list no longer has (assumed ones stay)."""
        pods = list(pods)
        listed = {(p.get("metadata") or {}).get("uid") for p in pods}
        for uid in [u for u, h in self.held.items() if h.assumed_until is None]:
            if uid not in listed:
                self._release(uid)
        self.pods.clear()
        for pod in pods:
            self.upsert_pod(pod)

    def assume(self, uid: str, request: PodRequest, node: str) -> None:
        """Count a pod on the node the extender ranked first until the watch catches up."""
        if uid in self.held and self.held[uid].assumed_until is None:
            return  # the watch was faster
        if uid in self.held:
            self._release(uid)
        deadline = self.clock.monotonic() + self.settings.kube.assumed_ttl_s
        self._hold(uid, node, request, assumed_until=deadline)

    # ---------------------------------------------------------------- reports

    def apply_report(self, report: NodeReport) -> None:
        """Take a validated report's signals for its node (which must be known)."""
        if report.node not in self.specs:
            raise KeyError(report.node)
        self.reports[report.node] = report
        signals = signals_of(report)
        self.signals[report.node] = signals
        if self.state is not None:
            self.state.set_signals(self.state.index[report.node], self._effective(signals))

    def expire(self) -> list[str]:
        """Forget stale reports and lapsed assumptions; return nodes that became unknown."""
        now_mono = self.clock.monotonic()
        for uid in [u for u, h in self.held.items() if h.assumed_until is not None]:
            if self.held[uid].assumed_until <= now_mono:  # type: ignore[operator]
                self._release(uid)
        now = self.clock.wall()
        ttl = self.settings.signals.report_ttl_s
        stale = [n for n, s in self.signals.items() if now - s.measured_at > ttl]
        for name in stale:
            del self.signals[name]
            if self.state is not None:
                self.state.set_signals(self.state.index[name], UNKNOWN)
        self.metrics.stale_nodes.set(len(self.specs) - len(self.signals))
        return stale

    # -------------------------------------------------------------- decisions

    def filter(self, pod: PodRequest, names: Iterable[str]) -> FilterResult:
        result = FilterResult()
        names = list(names)
        known = [n for n in names if n in self.specs]
        result.passing.extend(n for n in names if n not in self.specs)  # nothing known against
        if not known or self.state is None:
            return result
        state = self.state
        index = np.array([state.index[n] for n in known], dtype=np.int64)
        refused = livefilters.rejections(state, pod, index, self.settings.signals)
        admitted = self._engine().policy.admit(state, pod, np.ones(len(state), dtype=bool))
        for name, i in zip(known, index.tolist(), strict=True):
            if i in refused:
                target = result.unresolvable if refused[i].unresolvable else result.failed
                target[name] = refused[i].reason
            elif not admitted[i]:
                result.failed[name] = "kept free for the node's GPU pods (CPU-only pod)"
            else:
                result.passing.append(name)
        return result

    def prioritize(self, pod: PodRequest, names: Iterable[str]) -> dict[str, int]:
        """0–10 per node: 10 for the node the policy would pick, the rest scaled below it."""
        names = list(names)
        scores = dict.fromkeys(names, 0)
        known = [n for n in names if n in self.specs]
        if not known or self.state is None:
            return scores
        engine = self._engine()
        state = self.state
        index = np.array([state.index[n] for n in known], dtype=np.int64)
        candidates = np.zeros(len(state), dtype=bool)
        candidates[index] = True
        candidates &= engine.policy.admit(state, pod, engine.feasible(pod))
        if not candidates.any():
            return scores
        with self.metrics.policy_seconds.labels(engine.policy.name).time():
            raw = engine.scores(pod, candidates)
        best = np.nanmax(raw)
        worst = np.nanmin(raw)
        tied = np.flatnonzero(raw == best)
        first = int(tied[np.argmin(engine.rank[tied])])
        for name, i in zip(known, index.tolist(), strict=True):
            value = raw[i]
            if np.isnan(value):
                continue
            if i == first:
                scores[name] = MAX_EXTENDER_SCORE
            elif best > worst:
                scores[name] = int((MAX_EXTENDER_SCORE - 1) * (value - worst) / (best - worst))
            else:
                scores[name] = MAX_EXTENDER_SCORE - 1
        return scores

    def explain(self, pod: PodRequest, name: str) -> dict[str, Any]:
        if name not in self.specs or self.state is None:
            raise KeyError(name)
        i = self.state.index[name]
        rejection = livefilters.rejections(
            self.state, pod, np.array([i]), self.settings.signals
        ).get(i)
        known = name in self.signals
        return {
            "node": name,
            "policy": self._engine().policy.name,
            "signals": "fresh" if known else "unknown (no fresh report): neutral",
            "filter": rejection.reason if rejection else "passes",
            "components": dict(self._engine().explain(pod, i)),
        }

    # -------------------------------------------------------------- internals

    def _engine(self) -> Engine:
        if self.engine is None:
            raise LookupError("no nodes yet")
        return self.engine

    def _effective(self, signals: NodeSignals) -> NodeSignals:
        if self.settings.signals.true_allocatable:
            return signals
        from dataclasses import replace

        return replace(signals, true_allocatable_mem_b=-1)

    def _rebuild(self) -> None:
        names = sorted(self.specs)
        self.metrics.known_nodes.set(len(names))
        if not names:
            self.state, self.engine = None, None
            return
        state = ClusterState([self.specs[n] for n in names])
        for name, signals in self.signals.items():
            if name in state.index:
                state.set_signals(state.index[name], self._effective(signals))
        held, self.held = self.held, {}
        self.state = state
        self.engine = Engine(state, self.policy)  # rank = name order: stable across replicas
        for uid, h in held.items():
            self._hold(uid, h.node, h.request, h.assumed_until)

    def _hold(self, uid: str, node: str, request: PodRequest, assumed_until: float | None) -> None:
        """Take a pod's resources from its node, as much as is there: the API server's word
        that it runs there beats our arithmetic."""
        if self.state is None or node not in self.state.index:
            return
        state = self.state
        i = state.index[node]
        cpu = min(request.cpu_m, int(state.cpu_free[i]))
        mem = min(request.mem_b, int(state.mem_free[i]))
        devices: tuple[int, ...] = ()
        milli = request.gpu_milli
        if request.gpus and int((state.gpu_free[i] >= milli).sum()) >= request.gpus:
            devices = best_fit_devices(state.gpu_free[i], request.gpus, milli)
        state.allocate(Placement(i, devices), cpu, mem, milli if devices else 0, request.tag)
        self.held[uid] = Held(node, request, devices, cpu, mem, assumed_until)

    def _release(self, uid: str) -> None:
        held = self.held.pop(uid)
        if self.state is None or held.node not in self.state.index:
            return
        i = self.state.index[held.node]
        milli = held.request.gpu_milli if held.devices else 0
        self.state.release(
            Placement(i, held.devices), held.cpu_m, held.mem_b, milli, held.request.tag
        )
