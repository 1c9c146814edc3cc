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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from msgspec import structs

from common.clock import Clock
from common.schema import NodeReport
from coordinator.config import CoordinatorSettings
from coordinator.metrics import CoordinatorMetrics
from coordinator.scoring import livefilters, registry
from coordinator.scoring.base import Policy, best_fit_devices
from coordinator.scoring.engine import Engine
from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from coordinator.state.kubeobjects import ObjectError, node_spec, pod_request
from coordinator.state.podrequest import PodRequest
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
        self.unplaced: dict[str, tuple[str, PodRequest]] = {}
        """Pods bound to a node not (yet) known, by uid: the node and what they request.
        The Node and Pod watches are independent, so a pod can arrive before its node
        (at start, or when a node object registers again); it counts once the node does."""
        self.signals: dict[str, NodeSignals] = {}
        self.last_report_at: dict[str, float] = {}
        """When each node's latest report was measured. Only what the report means (its
        signals) is kept, not the report: 10,000 decoded reports hold most of a GiB. Holds
        known nodes only (a node removed or relisted away takes its entry along), which
        :meth:`apply_report` relies on."""
        self.pods: dict[str, PodRequest] = {}
        """Every non-terminal pod the API server has, bound or pending, by ``ns/name``."""
        self.state: ClusterState | None = None
        self.engine: Engine | None = None
        self._row_memo = _RowMemo()

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
            self.last_report_at.pop(name, None)
            for uid in [u for u, h in self.held.items() if h.node == name]:
                self._unplace(uid, self.held.pop(uid))
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
            for gone in [n for n in self.last_report_at if n not in specs]:
                self.signals.pop(gone, None)
                del self.last_report_at[gone]
            for uid in [u for u, h in self.held.items() if h.node not in specs]:
                self._unplace(uid, self.held.pop(uid))
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
        self.unplaced.pop(uid, None)
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
            if node:
                self.unplaced[uid] = (node, request)
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
        self.unplaced.pop(uid, None)
        if uid in self.held:
            self._release(uid)

    def replace_pods(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """A full relist: forget bound pods the list no longer has (assumed ones stay)."""
        pods = list(pods)
        listed = {(p.get("metadata") or {}).get("uid") for p in pods}
        for uid in [u for u, h in self.held.items() if h.assumed_until is None]:
            if uid not in listed:
                self._release(uid)
        previous, self.pods = self.pods, {}
        self.unplaced.clear()
        for pod in pods:
            meta = pod.get("metadata") or {}
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            if key in previous:  # not a first sight: the policy learnt it already
                self.pods[key] = previous[key]
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

    def apply_report(self, report: NodeReport) -> bool:
        """Take a validated report's signals for its node (which must be known, else
        KeyError). A report measured before the one already applied arrived late (a retry
        overtaken by a newer report): it is ignored, and False returned."""
        node = report.node
        last = self.last_report_at.get(node)
        if last is None:
            if node not in self.specs:
                raise KeyError(node)
        elif report.measured_at < last:
            return False
        self.last_report_at[node] = report.measured_at
        signals = self.signals[node] = signals_of(report)
        if self.state is not None:
            self.state.set_signals(self.state.index[node], self._effective(signals))
        return True

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
        """Which of ``names`` can take the pod: ``passing`` lists the names we do not know
        (nothing known against them), then the known ones that pass, each in the order
        given; the others map to why not, by name, in ``failed`` or ``unresolvable``.

        Vectorised over the nodes: per name, Python only finds its row (or compares it with
        the list offered last time) and copies it into the answer."""
        names = list(names)
        state = self.state
        if state is None:
            return FilterResult(passing=names)
        rows, known = self._rows(state, names)
        if not known.any():
            return FilterResult(passing=names)
        known_names = list(compress(names, known.tolist()))
        index = rows[known]
        found = livefilters.refusals(state, pod, index, self.settings.signals)
        admitted = self._engine().policy.admit(state, pod, np.ones(len(state), dtype=bool))
        refused, reason = found.refused, found.reasons
        kept = ~refused & ~admitted[index]
        reason[kept] = "kept free for the node's GPU pods (CPU-only pod)"
        unresolvable = found.unresolvable
        failed = (refused & ~unresolvable) | kept
        passing = ~(refused | kept)
        return FilterResult(
            passing=list(compress(names, (~known).tolist()))
            + list(compress(known_names, passing.tolist())),
            failed=_by_name(known_names, failed, reason),
            unresolvable=_by_name(known_names, unresolvable, reason),
        )

    def prioritize(self, pod: PodRequest, names: Iterable[str]) -> dict[str, int]:
        """0–10 per node: 10 for the node the policy would pick, the rest scaled below it."""
        names = list(names)
        return dict(zip(names, self.prioritize_each(pod, names).tolist(), strict=True))

    def prioritize_each(self, pod: PodRequest, names: Sequence[str]) -> npt.NDArray[np.int64]:
        """:meth:`prioritize`'s score of each of ``names``, in the order given (a name given
        twice scores twice); 0 for a name we do not know or a node the pod cannot take.

        Vectorised over the nodes: among the nodes given that can take the pod, the first
        of the best-scoring in node rank gets 10 and the others
        ``⌊9 · (score − worst) / (best − worst)⌋`` (9 when all tie)."""
        out = np.zeros(len(names), dtype=np.int64)
        state = self.state
        if state is None:
            return out
        rows, known = self._rows(state, names)
        if not known.any():
            return out
        engine = self._engine()
        candidates = np.zeros(len(state), dtype=bool)
        candidates[rows[known]] = True
        candidates &= engine.policy.admit(state, pod, engine.feasible(pod))
        if not candidates.any():
            return out
        with self.metrics.policy_seconds.labels(engine.policy.name).time():
            raw = engine.scores(pod, candidates)
        best = np.nanmax(raw)
        worst = np.nanmin(raw)
        tied = np.flatnonzero(raw == best)
        first = int(tied[np.argmin(engine.rank[tied])])
        scored = np.flatnonzero(~np.isnan(raw))
        scaled = np.zeros(len(state) + 1, dtype=np.int64)  # the last row: names not known
        if best > worst:
            with np.errstate(invalid="ignore", over="ignore"):
                values = (MAX_EXTENDER_SCORE - 1) * (raw[scored] - worst) / (best - worst)
                if not np.isfinite(values[scored != first]).all():  # from infinite scores
                    raise ValueError(f"policy {engine.policy.name}: scores cannot be scaled")
                scaled[scored] = values.astype(np.int64)  # as int(): towards zero (>= 0)
        else:
            scaled[scored] = MAX_EXTENDER_SCORE - 1
        scaled[first] = MAX_EXTENDER_SCORE
        each: npt.NDArray[np.int64] = scaled[rows]
        return each

    def _rows(self, state: ClusterState, names: Sequence[str]) -> _Rows:
        """Each name's row in ``state`` (-1 for a node we do not know), and which are known
        (both read-only)."""
        return self._row_memo.rows(state, names)

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
        """The signals as the switches under ``signals:`` let the policies see them: one
        switched off reads as not measured."""
        switches = self.settings.signals
        if not switches.true_allocatable:
            signals = structs.replace(signals, true_allocatable_mem_b=-1)
        if not switches.gpu_topology:
            signals = structs.replace(signals, gpu_links=None)
        return signals

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
        for uid, (node, request) in list(self.unplaced.items()):
            if node in state.index:  # its node is known now
                del self.unplaced[uid]
                if uid in self.held:  # assumed elsewhere: the API server's word wins
                    self._release(uid)
                self._hold(uid, node, request, assumed_until=None)

    def _unplace(self, uid: str, held: Held) -> None:
        """A pod whose node went away: bound ones wait for it to return, assumed ones go."""
        if held.assumed_until is None:
            self.unplaced[uid] = (held.node, held.request)

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


_Rows = tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]
"""A name list's rows (-1 for names not known) and which names are known."""


class _RowMemo:
    """Rows of the last few long name lists offered, for the current cluster state.

    kube-scheduler offers the same list again and again (every feasible node, in the same
    order, pod after pod), and comparing a list with the one seen before costs a tenth of
    looking every name up."""

    SIZE: Final = 4
    SHORTEST: Final = 256
    """Shorter lists are looked up afresh (Volcano's predicate offers one node a call)."""

    def __init__(self) -> None:
        self.state: ClusterState | None = None
        self.lists: dict[tuple[int, str, str], tuple[list[str], _Rows]] = {}

    def rows(self, state: ClusterState, names: Sequence[str]) -> _Rows:
        if state is not self.state:  # rebuilt: rows moved
            self.state, self.lists = state, {}
        key = (len(names), names[0], names[-1]) if len(names) >= self.SHORTEST else None
        if key is not None and key in self.lists:
            seen, rows = self.lists[key]
            if seen == names:
                return rows
        count = len(names)
        index = np.fromiter(map(state.index.get, names, repeat(-1, count)), np.int64, count)
        known = index >= 0
        index.flags.writeable = known.flags.writeable = False
        if key is not None:
            if key not in self.lists and len(self.lists) >= self.SIZE:
                del self.lists[next(iter(self.lists))]  # the oldest
            self.lists[key] = (list(names), (index, known))
        return index, known


def _by_name(
    names: Sequence[str], chosen: npt.NDArray[np.bool_], values: npt.NDArray[Any]
) -> dict[str, Any]:
    """``{names[k]: values[k]}`` for the ``k`` chosen, in order."""
    return dict(zip(compress(names, chosen.tolist()), values[chosen].tolist(), strict=True))
