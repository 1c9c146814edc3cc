"""The live cluster: Nodes and Pods from the API server's watches, signals from agent
reports, and the extender's decisions over them — all over one :class:`ClusterState`.

* **Nodes come from the Node watch only.** Node objects in extender requests are that
  request's view and never change what is stored (:mod:`coordinator.extender.handling`).
  A Node that cannot be understood (a negative size, a count of GPUs no node has) is
  skipped with a warning, so it can never make later updates or reports fail.
* **Pods** bound to a node take their requests from it; so do pods the extender just
  ranked first (*assumed*, :mod:`coordinator.live.holdings`) until the pod watch says
  where they were bound or ``assumed_ttl_s`` passes. Volcano's assumptions count only for
  Volcano's calls (:meth:`LiveCluster.counting_volcano`): its plugin cannot authenticate,
  so pods made up through it must not change what kube-scheduler, which may be behind
  mutual TLS, is told.
* **Freshness** — whether a node's report still counts, on the coordinator's own
  receipt clock — is judged by :mod:`coordinator.live.freshness` alone; :meth:`expire`
  drops the signals and releases the colocation throttle of nodes it finds stale. Of two
  reports of a node, the one whose request arrived later wins.

Adding or removing a node rebuilds the state (rare); everything else updates it in place
and bumps only the changed node's version, so the engine rescoring stays incremental.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import structs

from common.clock import Clock
from common.schema import NodeReport
from coordinator import feasibility
from coordinator.colocation.hub import Colocation
from coordinator.config import CoordinatorSettings
from coordinator.live.cooldowns import SharedCooldowns
from coordinator.live.decisions import FilterResult, explain, filter_nodes, prioritize_rows
from coordinator.live.freshness import Receipts
from coordinator.live.gangs import Gangs
from coordinator.live.holdings import Held, Holdings, namespace_of
from coordinator.live.nominations import Nomination, Nominations, matched
from coordinator.live.rows import RowMemo
from coordinator.metrics import CoordinatorMetrics
from coordinator.scoring import ganglocality, iocontention, registry, tenancy
from coordinator.scoring.base import Policy
from coordinator.scoring.engine import Engine
from coordinator.scoring.mig import verdict as mig_verdict
from coordinator.scoring.mig.advertised import MigGpu
from coordinator.state.checkpointing import CheckpointingClaims
from coordinator.state.cluster import ClusterState, NodeSpec
from coordinator.state.kubeobjects import ObjectError, node_spec, pod_request
from coordinator.state.podfacts import Budgets, PodFacts, pod_facts
from coordinator.state.podgroups import PodGroups
from coordinator.state.podrequest import PodRequest
from coordinator.state.reports import signals_of
from coordinator.state.signals import UNKNOWN, NodeSignals

log = logging.getLogger(__name__)

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


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
        self.node_facts: dict[str, feasibility.Node] = {}
        """What kube-scheduler's filters read of each node (taints, labels, cordon,
        allocatable), for the feasibility model; the same nodes as :attr:`specs`."""
        self.soft_tainted: set[str] = set()
        """Nodes with a ``PreferNoSchedule`` taint: kube-scheduler's scoring weighs them
        down, which the extender's filter must not pre-empt by picking a node itself."""
        self.nominations = Nominations()
        """Pending pods the leader's preemptions freed room for, from the Node annotations
        (:mod:`coordinator.live.nominations`): held for them in every decision."""
        self.cooldowns = SharedCooldowns()
        """The queues whose last round evicted lately, from the leader's Lease
        (:mod:`coordinator.live.cooldowns`): the preempt verb lets none of theirs through."""
        self.holdings = Holdings(settings.kube)
        """Bound pods and kube-scheduler's assumptions: what every decision counts."""
        self.volcano_assumed = Holdings(settings.kube)
        """Volcano's assumptions, counted in :attr:`state` only within
        :meth:`counting_volcano` (their own bounds: made-up Volcano pods push out only
        Volcano's assumptions)."""
        self._assuming = self.holdings
        """Where :meth:`assume` and :meth:`unassume` go: Volcano's within
        :meth:`counting_volcano`."""
        self.signals: dict[str, NodeSignals] = {}
        """Fresh signals by node: a node without an entry is unknown (neutral)."""
        self.freshness = Receipts(settings.signals, clock)
        """When each known node's latest applied report was received (a node removed or
        relisted away takes its entry along): the one judge of freshness and of the order
        of reports."""
        self.pods: dict[str, PodRequest] = {}
        """Every non-terminal pod the API server has, bound or pending, by ``ns/name``."""
        self.facts: dict[str, PodFacts] = {}
        """The same pods' facts for the eviction planner (level, gang, checkpoint), by uid."""
        self.pending_of: dict[tuple[str, str], set[str]] = {}
        """``(namespace, controller uid)`` → the uids of its pods pending (on no node): the
        pods a reservation of that controller may hold room for
        (:mod:`coordinator.live.nominations`)."""
        self.claims = CheckpointingClaims(settings.evictions.checkpointing_max_s)
        """Since when each pod's checkpointing claim counts, across its updates."""
        self.budgets = Budgets()
        """PodDisruptionBudgets, from their watch."""
        self.podgroups = PodGroups()
        """Volcano PodGroups' queues, from their watch (none where Volcano is not installed)."""
        self.gangs = Gangs(settings.gang.topology_keys)
        """Pods by gang and the nodes' topology domains, for gang locality."""
        self.state: ClusterState | None = None
        self.engine: Engine | None = None
        self._row_memo = RowMemo()
        self.colocation = Colocation(settings.colocation, metrics)
        """Per-node best-effort throttles, released as the same judge makes signals stale."""

    @property
    def held(self) -> dict[str, Held]:
        """Pod uid → what it holds on its node (bound or assumed)."""
        return self.holdings.held

    # ------------------------------------------------------------------ nodes

    def upsert_node(self, node: Mapping[str, Any]) -> None:
        """A Node as the watch has it; one that cannot be understood is skipped (logged)."""
        try:
            spec, facts = node_spec(node), feasibility.node_of(node)
        except (ObjectError, feasibility.Malformed) as e:
            log.warning("ignoring node: %s", e)
            return
        if (known := self.node_facts.get(spec.name)) is None or known.labels != facts.labels:
            self.gangs.nodes_changed()
        self.node_facts[spec.name] = facts
        self.nominations.observe(spec.name, _annotations(node))
        self.colocation.set_labels(spec.name, _labels(node))
        self._note_taints(spec.name, node)
        if self.specs.get(spec.name) != spec:
            self.specs[spec.name] = spec
            self._rebuild()

    def remove_node(self, name: str) -> None:
        self.soft_tainted.discard(name)
        self.node_facts.pop(name, None)
        self.nominations.forget(name)
        if self.specs.pop(name, None) is not None:
            self._forget_nodes({name})
            self._rebuild()

    def replace_nodes(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        """A full relist: exactly these nodes (those that can be understood), from now on."""
        specs = {}
        self.soft_tainted = set()
        self.node_facts = {}
        self.nominations = Nominations()
        self.gangs.nodes_changed()
        for node in nodes:
            try:
                spec, facts = node_spec(node), feasibility.node_of(node)
            except (ObjectError, feasibility.Malformed) as e:
                log.warning("ignoring node: %s", e)
                continue
            specs[spec.name] = spec
            self.node_facts[spec.name] = facts
            self.nominations.observe(spec.name, _annotations(node))
            self.colocation.set_labels(spec.name, _labels(node))
            self._note_taints(spec.name, node)
        if specs != self.specs:
            gone = self.specs.keys() - specs.keys()
            self.specs = specs
            self._forget_nodes(gone)
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
        holdings = self.holdings
        current = holdings.held.get(uid)
        holdings.unplaced.pop(uid, None)
        if node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            self.volcano_assumed.unassume(None, uid)  # the API server's word wins
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            self.pods.pop(key, None)
            self._index_pending(uid, self.facts.pop(uid, None), None)
            self.claims.forget(uid)
            self.gangs.drop(uid)
            if current is not None:
                holdings.release(self.state, uid)
            return
        try:
            request = pod_request(pod, self.settings.signals.contiguity_threshold_b)
        except ObjectError as e:
            log.warning("ignoring pod: %s", e)
            return
        if key not in self.pods:  # first sight: a policy that learns the workload learns it
            self.policy.observe(self.state, request, None)  # type: ignore[arg-type]
        self.pods[key] = request
        facts = pod_facts(pod, request, self.settings.evictions.level_label)
        self._index_pending(uid, self.facts.get(uid), facts)
        self.facts[uid] = facts
        self.claims.observe(facts, self.clock.monotonic())
        self.gangs.note(uid, request.gang)
        if not node or node not in self.specs:
            if current is not None and current.assumed_until is None:
                holdings.release(self.state, uid)
            if node:
                holdings.unplaced[uid] = (node, request)
            return
        holdings.bind(self.state, uid, node, request)

    def remove_pod(self, pod: Mapping[str, Any]) -> None:
        meta = _metadata(pod)
        self.pods.pop(f"{meta.get('namespace') or 'default'}/{meta.get('name')}", None)
        uid = meta.get("uid")
        if uid is None:
            return  # nothing else is kept for a pod but by its uid
        self._index_pending(uid, self.facts.pop(uid, None), None)
        self.claims.forget(uid)
        self.gangs.drop(uid)
        self.holdings.unplaced.pop(uid, None)
        self.volcano_assumed.unassume(None, uid)
        if uid in self.holdings.held:
            self.holdings.release(self.state, uid)

    def replace_pods(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """A full relist: forget bound pods the list no longer has (assumed ones stay)."""
        pods = list(pods)
        listed = {uid for p in pods if (uid := _metadata(p).get("uid")) is not None}
        for uid in [u for u, h in self.held.items() if h.assumed_until is None]:
            if uid not in listed:
                self.holdings.release(self.state, uid)
        previous, self.pods = self.pods, {}
        self.facts = {}
        self.pending_of = {}
        self.holdings.unplaced.clear()
        for pod in pods:
            meta = pod.get("metadata") or {}
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            if key in previous:  # not a first sight: the policy learnt it already
                self.pods[key] = previous[key]
            self.upsert_pod(pod)
        self.claims.retain(listed)
        self.gangs.retain(listed)

    def assume(self, uid: str, request: PodRequest, node: str) -> None:
        """Count a pod on the node the extender ranked first until the watch catches up
        (bounded: see :mod:`coordinator.live.holdings`)."""
        bound = self.holdings.held.get(uid)
        if bound is not None and bound.assumed_until is None:
            return  # the watch was faster
        self._assuming.assume(self.state, uid, request, node, self.clock.monotonic())

    def unassume(self, uid: str) -> None:
        """Stop counting pod ``uid`` where it was assumed: its scheduler is asking about it
        again (a retry), and its own guess must not stand in its way."""
        self._assuming.unassume(self.state, uid)

    def facts_named(self, name: str) -> PodFacts | None:
        """The pod an operator names ``NAMESPACE/NAME`` (``NAME`` alone: in ``default``),
        as the read-only previews take it; None when it is not known."""
        key = name if "/" in name else f"default/{name}"
        return next((f for f in self.facts.values() if f.key == key), None)

    def nominees(self, scheduler_too: bool = True) -> dict[str, tuple[str, PodFacts]]:
        """Pending pods that room is held for, by uid: the node and the pod. Stowage's own
        nominations (unexpired, by the wall clock) and, ``scheduler_too``,
        kube-scheduler's (``status.nominatedNodeName``, which its preemption sets); a pod
        that is bound, gone, or nominated to a node not known holds nothing."""
        found: dict[str, tuple[str, PodFacts]] = {}
        for uid, facts in self.facts.items() if scheduler_too else ():
            node = facts.scheduling.nominated
            if facts.node is None and node is not None and node in self.specs:
                found[uid] = (node, facts)
        for entry, holder in self.held_room():
            if holder is not None and (not entry.reservation or holder.uid not in found):
                found[holder.uid] = (entry.node, holder)
        return found

    def held_room(self) -> list[tuple[Nomination, PodFacts | None]]:
        """Every unexpired nomination and reservation (by the wall clock) on a known node,
        with the pending pod it holds room for now: a nomination's own pod, a
        reservation's pod of its controller (:mod:`coordinator.live.nominations`); None
        where there is none (bound, gone, not created yet)."""
        found: list[tuple[Nomination, PodFacts | None]] = []
        reserved: list[Nomination] = []
        for entry in self.nominations.active(self.clock.wall()):
            if entry.node not in self.specs:
                continue
            if entry.reservation:
                reserved.append(entry)
                continue
            nominee = self.facts.get(entry.uid)
            found.append((entry, nominee if nominee is not None and nominee.node is None else None))
        holders = {entry: uid for uid, entry in self._reservation_holders(reserved).items()}
        for entry in reserved:
            uid = holders.get(entry)
            found.append((entry, None if uid is None else self.facts[uid]))
        return found

    def reserved_node(self, uid: str, namespace: str, controller: str | None) -> str | None:
        """The node reserved for pod ``uid`` of ``namespace`` whose controller has the uid
        ``controller`` (a moved pod's replacement, :mod:`coordinator.live.nominations`),
        where the extender steers it; None when it has none. A pod the Pod watch does not
        have yet (the scheduler's watch was faster) gets the first reservation of its
        controller that holds room for no pending pod."""
        if controller is None or not self.nominations:
            return None
        mine = [
            e
            for e in self.nominations.active(self.clock.wall())
            if e.reservation and (e.namespace, e.uid) == (namespace, controller)
            and e.node in self.specs
        ]  # fmt: skip
        if not mine:
            return None
        holders = self._reservation_holders(mine)
        if uid in holders:
            return holders[uid].node
        if uid in self.pending_of.get((namespace, controller), ()):
            return None  # a pod of the controller that no reservation is left for
        taken = set(holders.values())
        free = sorted((e for e in mine if e not in taken), key=lambda e: (e.node, e.until))
        return free[0].node if free else None

    def _reservation_holders(self, reservations: Sequence[Nomination]) -> dict[str, Nomination]:
        """Pending pod uid → the reservation (of ``reservations``) holding room for it:
        each controller's pending pods by name
        (:func:`coordinator.live.nominations.matched`), but for those nominated to a node
        of their own."""
        if not reservations:
            return {}
        wall = self.clock.wall()
        nominated = {e.uid for e in self.nominations.active(wall) if not e.reservation}
        pending: dict[tuple[str, str], list[str]] = {}
        for key in {(e.namespace, e.uid) for e in reservations}:
            uids = self.pending_of.get(key, set()) - nominated
            wanted = sum(1 for e in reservations if (e.namespace, e.uid) == key)
            pending[key] = heapq.nsmallest(wanted, uids, key=lambda u: (self.facts[u].name, u))
        return matched(reservations, pending)

    def _index_pending(self, uid: str, old: PodFacts | None, new: PodFacts | None) -> None:
        """Keep :attr:`pending_of` as pod ``uid``'s facts go from ``old`` to ``new``."""
        for facts, add in ((old, False), (new, True)):
            if facts is None or facts.controller_uid is None or facts.node is not None:
                continue
            key = (facts.namespace, facts.controller_uid)
            if add:
                self.pending_of.setdefault(key, set()).add(uid)
            elif (uids := self.pending_of.get(key)) is not None:
                uids.discard(uid)
                if not uids:
                    del self.pending_of[key]

    @contextmanager
    def nominated_room(self, uid: str, priority: int) -> Iterator[None]:
        """Within, the pods nominated to a node hold their room there for the pod ``uid``
        of ``priority``: all but the pod itself and those of lower priority
        (:mod:`coordinator.live.nominations`). kube-scheduler's own nominations are not
        counted here: its filters count them before it asks the extender. The block must
        not await: another request would see the room held meanwhile."""
        state = self.state
        if state is None or not self.nominations:
            yield
            return
        holding = Holdings(self.settings.kube)
        for other, (node, facts) in self.nominees(scheduler_too=False).items():
            if other != uid and facts.priority >= priority:
                holding.bind(state, other, node, facts.request)
        try:
            yield
        finally:
            holding.lift(state)

    def hold_nominations(self) -> None:
        """Count every nominee where it is nominated, as an assumption, for good: for a
        copy of the cluster that is planned on and thrown away (the eviction planner's,
        in its child process), where a nominee is never a victim, never planned for
        again, and its room not promised twice."""
        for uid, (node, facts) in self.nominees().items():
            self.holdings.unassume(self.state, uid)
            self.holdings.assume(self.state, uid, facts.request, node, math.inf)

    @contextmanager
    def counting_volcano(self) -> Iterator[None]:
        """Answer for Volcano: within, Volcano's assumptions count in :attr:`state` as well,
        and :meth:`assume` and :meth:`unassume` are Volcano's. Outside, they do not count:
        anyone who reaches the main listener can make up a Volcano task, and its assumption
        must not make kube-scheduler's calls (perhaps on a listener that asks for client
        certificates) refuse real pods. The block must not await: another request would
        see Volcano's assumptions meanwhile."""
        state = self.state
        if state is None:
            yield
            return
        self.volcano_assumed.replay(state)
        self._assuming = self.volcano_assumed
        try:
            yield
        finally:
            self._assuming = self.holdings
            self.volcano_assumed.lift(state)

    # ---------------------------------------------------------------- reports

    def apply_report(self, report: NodeReport, received_at: float | None = None) -> bool:
        """Take a validated report's signals for its node (which must be known, else
        KeyError). ``received_at`` is when its request arrived, on this coordinator's
        monotonic clock (now if not given). A report whose request arrived before that of
        the report already applied was overtaken (a retry that took longer): it is
        ignored, and False returned. The agent's ``measured_at`` plays no part."""
        node = report.node
        if node not in self.specs:
            raise KeyError(node)
        if received_at is None:
            received_at = self.clock.monotonic()
        covered_s = self.freshness.since_previous_s(node, received_at)
        if not self.freshness.receive(node, received_at, report.measured_at):
            return False
        signals = self.signals[node] = signals_of(report, self.signals.get(node))
        if self.state is not None:
            i = self.state.index[node]
            self.state.set_signals(i, self._effective(signals, self.specs[node]))
        self.colocation.observe(report, received_at, covered_s)
        return True

    def expire(self) -> list[str]:
        """Forget the signals of nodes whose report went stale (releasing their colocation
        throttles) and lapsed assumptions; return the nodes that became unknown. Both by
        the monotonic clock only."""
        now = self.clock.monotonic()
        self.holdings.expire(self.state, now)
        self.volcano_assumed.expire(None, now)
        stale = self.freshness.stale_among(self.signals, now)
        for name in stale:
            del self.signals[name]
            self.colocation.release(name, now)
            if self.state is not None:
                self.state.set_signals(self.state.index[name], UNKNOWN)
        self.metrics.stale_nodes.set(len(self.specs) - len(self.signals))
        return stale

    # -------------------------------------------------------------- decisions

    def filter(self, pod: PodRequest, names: Iterable[str]) -> FilterResult:
        """See :func:`coordinator.live.decisions.filter_nodes`; with no nodes yet, every
        name passes."""
        names = list(names)
        state = self.state
        if state is None:
            return FilterResult(passing=names, passed=np.ones(len(names), dtype=bool))
        offered = self._row_memo.rows(state, names)
        result = filter_nodes(self._engine(), pod, offered, self.settings.signals)
        return self._mig_filter(pod, names, result) if pod.mig else result

    def _mig_filter(self, pod: PodRequest, names: list[str], result: FilterResult) -> FilterResult:
        """``result`` less the passing nodes without free instances of the profiles the pod
        asks for (:func:`coordinator.scoring.mig.verdict.refusal_on`), each with the
        reason. It reads every pod's facts once, and is asked only for a MIG pod."""
        judged = {n: self.node_facts[n] for n in result.passing if n in self.node_facts}
        bound: dict[str, list[Mapping[str, int]]] = {n: [] for n in judged}
        for facts in self.facts.values():
            if facts.node in bound:
                bound[facts.node].append(facts.scheduling.requests)
        failed, unresolvable = dict(result.failed), dict(result.unresolvable)
        for name, node in judged.items():
            signals = self.signals.get(name)
            gpus = [MigGpu(*g) for g in signals.mig_gpus] if signals is not None else []
            refused = mig_verdict.refusal_on(
                dict(pod.mig), node.allocatable, mig_verdict.in_use(bound[name]), gpus
            )
            if refused is not None:
                (unresolvable if refused.unresolvable else failed)[name] = refused.reason
        passing = [n for n in result.passing if n not in failed and n not in unresolvable]
        kept = set(passing)
        passed = np.fromiter((n in kept for n in names), dtype=bool, count=len(names))
        return FilterResult(passing, failed, unresolvable, passed)

    def prioritize(self, pod: PodRequest, names: Iterable[str]) -> dict[str, int]:
        """0–10 per node: 10 for the node the policy would pick, the rest scaled below it."""
        names = list(names)
        return dict(zip(names, self.prioritize_each(pod, names).tolist(), strict=True))

    def prioritize_each(self, pod: PodRequest, names: Sequence[str]) -> npt.NDArray[np.int64]:
        """:meth:`prioritize`'s score of each of ``names``, in the order given (see
        :func:`coordinator.live.decisions.prioritize_rows`)."""
        state = self.state
        if state is None:
            return np.zeros(len(names), dtype=np.int64)
        offered = self._row_memo.rows(state, names)
        locality = self._gang_locality(pod)
        return prioritize_rows(
            self._engine(),
            pod,
            offered.index,
            offered.known,
            self.metrics,
            self._ranked_first(pod, offered.index[offered.known]),
            None if locality is None else (locality.term, self.settings.gang.weight),
        )

    def _ranked_first(
        self, pod: PodRequest, rows: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64] | None:
        """What prioritize ranks the nodes of ``rows`` by before the policy's score: the I/O
        spreading penalty (:meth:`_io_spread`) less the tenancy preference
        (:func:`coordinator.scoring.tenancy.preference`); None where neither applies."""
        penalty = self._io_spread(pod)
        state = self.state
        tenancy_rule = self.settings.signals.tenancy
        bonus = None if state is None else tenancy.preference(state, pod, rows, tenancy_rule)
        if bonus is None:
            return penalty
        return -bonus if penalty is None else penalty - bonus

    def _io_spread(self, pod: PodRequest) -> npt.NDArray[np.float64] | None:
        """For a pod marked I/O-heavy, each node's spreading penalty
        (:func:`coordinator.scoring.iocontention.spread_penalty`): its namespace's I/O-heavy
        pods there (Volcano's assumptions too while answering Volcano), and the node's
        measured I/O. None for other pods, or with ``signals.io`` off."""
        io = self.settings.signals.io
        state = self.state
        if not pod.io_heavy or not io.enabled or not io.spread or state is None:
            return None
        same = np.zeros(len(state), dtype=np.int64)
        namespace = namespace_of(pod)
        holdings = [self.holdings]
        if self._assuming is self.volcano_assumed:
            holdings.append(self.volcano_assumed)
        for held in holdings:
            for node, count in held.io_heavy.get(namespace, {}).items():
                same[state.index[node]] += count
        return iocontention.spread_penalty(state, same)

    def _gang_locality(self, pod: PodRequest) -> ganglocality.Locality | None:
        """For a member of a gang, every node's gang locality term
        (:mod:`coordinator.scoring.ganglocality`) from where its gang's other members hold
        room (Volcano's assumptions too while answering Volcano); None for other pods, or
        with ``gang.enabled`` off."""
        state = self.state
        if pod.gang is None or not self.settings.gang.enabled or state is None:
            return None
        holdings = [self.holdings]
        if self._assuming is self.volcano_assumed:
            holdings.append(self.volcano_assumed)
        gang = self.gangs.gang(pod, state, self.facts, holdings, self.podgroups)
        if gang is None:
            return None
        domains = self.gangs.domains(state, self.node_facts)
        return ganglocality.locality(state, pod, gang, domains)

    def explain(self, pod: PodRequest, name: str) -> dict[str, Any]:
        """:func:`coordinator.live.decisions.explain`, and the node's latest report: when
        its agent says it measured it, and how long ago this coordinator received it (what
        freshness goes by); None before any."""
        if name not in self.specs or self.state is None:
            raise KeyError(name)
        i = self.state.index[name]
        answer = explain(self._engine(), pod, i, name in self.signals, self.settings.signals)
        verdict = self.freshness.verdict(name)
        answer["report"] = (
            None
            if verdict.age_s is None
            else {"measured_at": verdict.measured_at, "received_s_ago": verdict.age_s}
        )
        penalty = self._io_spread(pod)
        if penalty is not None:  # what prioritize ranks an I/O-heavy pod's nodes by first
            answer["io_spread_penalty"] = round(float(penalty[i]), 3)
        mig = self._mig_explain(pod, name)
        if mig is not None:  # the pod's MIG asks, the node's instances per profile
            answer["mig"] = mig
        tenants = tenancy.explain(self.state, i, pod, self.settings.signals.tenancy)
        if tenants is not None:  # the rule's view of the node's NUMA nodes
            answer["tenancy"] = tenants
        locality = self._gang_locality(pod)
        if locality is not None:  # the gang's domains and this node's term in prioritize
            domains = self.gangs.domains(self.state, self.node_facts)
            answer["gang"] = {
                **ganglocality.explain(locality, domains, self.state, i),
                "weight": self.settings.gang.weight,
            }
        return answer

    # -------------------------------------------------------------- internals

    def _mig_explain(self, pod: PodRequest, name: str) -> dict[str, Any] | None:
        """:func:`coordinator.scoring.mig.verdict.explain` of the pod on node ``name``:
        the Node's allocatable, what its bound pods request, its report's MIG GPUs. A
        debug answer: it reads every pod's facts once."""
        facts = self.facts_named(pod.name)
        node = self.node_facts.get(name)
        if facts is None or node is None:
            return None
        signals = self.signals.get(name)
        gpus = () if signals is None else signals.mig_gpus
        bound = (f.scheduling.requests for f in self.facts.values() if f.node == name)
        return mig_verdict.explain(
            facts.scheduling.requests,
            node.allocatable,
            mig_verdict.in_use(bound),
            [MigGpu(enabled, profiles) for enabled, profiles in gpus],
        )

    def _note_taints(self, name: str, node: Mapping[str, Any]) -> None:
        taints = (node.get("spec") or {}).get("taints")
        soft = isinstance(taints, list) and any(
            isinstance(t, Mapping) and t.get("effect") == "PreferNoSchedule" for t in taints
        )
        if soft:
            self.soft_tainted.add(name)
        else:
            self.soft_tainted.discard(name)

    def _engine(self) -> Engine:
        if self.engine is None:
            raise LookupError("no nodes yet")
        return self.engine

    def _effective(self, signals: NodeSignals, spec: NodeSpec) -> NodeSignals:
        """The signals as the policies may see them: one switched off under ``signals:``
        reads as not measured, and so do NVLinks measured for other GPUs than the node
        has (a matrix not ``gpus`` × ``gpus``: time-sliced or MIG devices counted as
        GPUs, or a report at odds with the Node) — device indices would not match."""
        switches = self.settings.signals
        if not switches.true_allocatable:
            signals = structs.replace(signals, true_allocatable_mem_b=-1)
        links = signals.gpu_links
        if links is not None and (not switches.gpu_topology or len(links) != spec.gpus):
            signals = structs.replace(signals, gpu_links=None)
        return signals

    def _forget_nodes(self, gone: set[str]) -> None:
        """Nodes left the cluster: their reports go, pods on them wait or go."""
        for name in gone:
            self.signals.pop(name, None)
            self.freshness.forget(name)
            self.colocation.forget(name)
        self.holdings.leave(gone)
        self.volcano_assumed.leave(gone)

    def _rebuild(self) -> None:
        names = sorted(self.specs)
        self.metrics.known_nodes.set(len(names))
        if not names:
            self.state, self.engine = None, None
            return
        state = ClusterState([self.specs[n] for n in names])
        for name, signals in self.signals.items():
            state.set_signals(state.index[name], self._effective(signals, self.specs[name]))
        self.state = state
        self.engine = Engine(state, self.policy)  # rank = name order: stable across replicas
        self.holdings.replay(state)


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    """A Node's labels (they select its colocation pool); malformed ones read as none."""
    return _strings(node, "labels")


def _annotations(node: Mapping[str, Any]) -> dict[str, str]:
    """A Node's annotations (its nominations); malformed ones read as none."""
    return _strings(node, "annotations")


def _strings(node: Mapping[str, Any], field: str) -> dict[str, str]:
    found = (node.get("metadata") or {}).get(field)
    if not isinstance(found, Mapping):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An API object's ``metadata`` as JSON, empty where it has none."""
    return obj.get("metadata") or {}
