"""The eviction planner's search: the cheapest safe set of victims when a pending pod fits
nowhere (:func:`plan_preemption`), kube-scheduler's preemption candidates narrowed by the
same rules (:func:`narrow_victims`), and the one pod to evict from a node under lasting
memory pressure (:func:`plan_pressure`). Pure functions over a read-only
:class:`~coordinator.eviction.view.ClusterView`; what they answer is in
:mod:`coordinator.eviction.answers`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, islice
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator import feasibility
from coordinator.config import EvictionSettings
from coordinator.eviction.answers import (
    NO_DEADLINE,
    Deadline,
    Level,
    Plan,
    Refusal,
    Victim,
    level_of,
    queue_of,
)
from coordinator.eviction.view import ClusterView, given_back
from coordinator.live.decisions import judge
from coordinator.scoring import capacity, livefilters
from coordinator.state.podfacts import PodFacts

# -------------------------------------------------------------------- planning


def plan_preemption(
    view: ClusterView,
    pod: PodFacts,
    settings: EvictionSettings,
    now: float,
    deadline: Deadline = NO_DEADLINE,
) -> Plan | Refusal:
    """The cheapest round that makes the pending ``pod`` fit somewhere: the node and the
    victims minimising :attr:`Plan.cost`, every rule holding — or why there is none.
    ``now`` is Unix seconds (checkpoint times and cooldowns are wall-clock facts).

    "Fit" is Stowage's filter and kube-scheduler's filters both
    (:mod:`coordinator.feasibility`): a node a filter refuses whatever is evicted
    (cordoned, tainted, not selected) or that the model cannot judge (volumes, DRA) is
    never planned on, and a pod that may not preempt (``preemptionPolicy: Never``,
    scheduling gates, victims already terminating for it) gets no plan. The search stops
    at ``deadline`` with the cheapest plan found so far (:attr:`Plan.cut`)."""
    queue = queue_of(view, pod, settings, now)
    refusal = _gate(view, queue, settings, now)
    if refusal is not None:
        return refusal
    question = feasibility.Question(pod.scheduling, view.snapshot)
    barred = question.barred()
    if barred is not None:
        return Refusal(barred)
    level = _displacer(pod, settings)
    if isinstance(level, Refusal):
        return level
    state = view.state
    everywhere = np.arange(len(state), dtype=np.int64)
    found = judge(state, view.policy, pod.request, everywhere, view.signals)
    for i in np.flatnonzero(~found.refused).tolist():
        if question.without(state.names[i]).fits:
            return Refusal(f"{pod.key} fits on {state.names[i]} without evicting anyone")
    resolvable = [
        i
        for i in np.flatnonzero(~found.unresolvable).tolist()
        if state.names[i] not in view.promised
    ]
    verdicts = [question.static(state.names[i]) for i in resolvable]
    rows = np.array([i for i, v in zip(resolvable, verdicts, strict=True) if v.fits], np.int64)
    if not len(rows):
        why = next((v.reason for v in verdicts), found.reasons[0])
        return Refusal(f"no node could take {pod.key} even empty ({why})")
    rules = _Rules(view, level, settings, now, capped=True)
    why = f"makes room for {pod.key} ({level.name.lower()})"
    best, cut = _search(rules, pod, question, rows, None, False, why, deadline)
    if not best and cut:
        return Refusal(f"no plan for {pod.key} found before the planning deadline")
    if not best:
        return Refusal(f"no node: {pod.key} would still not fit after evicting every allowed pod")
    node, (cost, victims) = min(best.items(), key=lambda item: (item[1][0], item[0]))
    weight = settings.queue_weights.get(queue, 0)
    return Plan(
        trigger="preemption",
        node=node,
        victims=victims,
        preemptor=pod.key,
        queue=queue,
        reason=(
            f"{pod.key} ({level.name.lower()}) fits on {node} after evicting"
            f" {len(victims)} pod(s): {', '.join(f'{v.namespace}/{v.name}' for v in victims)}"
            + ("; the planning deadline cut the search: a cheaper set may exist" if cut else "")
        ),
        needs_approval=weight > settings.approval_weight_above,
        cost=cost,
        cut=cut,
        preemptor_uid=pod.uid,
    )


def narrow_victims(
    view: ClusterView,
    pod: PodFacts,
    proposed: Mapping[str, frozenset[str]],
    settings: EvictionSettings,
    now: float,
    deadline: Deadline = NO_DEADLINE,
) -> dict[str, tuple[Victim, ...]] | Refusal:
    """kube-scheduler's preemption candidates (node → uids of the victims it proposes),
    narrowed by the planner's own rules: per node the cheapest subset of the proposed
    victims that every rule allows and after whose eviction both Stowage's filter and
    kube-scheduler's filters (:mod:`coordinator.feasibility`, the same model the planner
    plans by) pass the pod there. A node with no such subset is dropped, never narrowed
    to a set that frees room the pod still cannot use; so is a node Stowage does not
    know (its victims are never passed on unchecked).

    The round-level rules apply as to a plan, and refuse every node (the
    :class:`Refusal` says why): nothing while the pod's queue cools down or the budgets
    are not listed, nothing for a pod that may not preempt, and nothing for a queue whose
    plans need a person's approval (the eviction cycle proposes that plan instead;
    kube-scheduler's preemption cannot wait for one). Past ``deadline`` the nodes without
    a set found yet are dropped."""
    queue = queue_of(view, pod, settings, now)
    refusal = _gate(view, queue, settings, now)
    if refusal is not None:
        return refusal
    if settings.queue_weights.get(queue, 0) > settings.approval_weight_above:
        return Refusal(
            f"queue {queue}'s plans need a person's approval: the eviction cycle proposes one"
        )
    question = feasibility.Question(pod.scheduling, view.snapshot)
    barred = question.barred()
    if barred is not None:
        return Refusal(barred)
    level = _displacer(pod, settings)
    if isinstance(level, Refusal):
        return level
    state = view.state
    known = sorted(state.index[n] for n in proposed if n in state.index and question.static(n).fits)
    rows = np.array(known, dtype=np.int64)
    if not len(rows):
        return {}
    found = judge(state, view.policy, pod.request, rows, view.signals)
    rules = _Rules(view, level, settings, now, capped=True)
    why = f"proposed by kube-scheduler for {pod.key} ({level.name.lower()})"
    best, _ = _search(
        rules, pod, question, rows[~found.unresolvable], proposed, True, why, deadline
    )
    return {node: victims for node, (_, victims) in best.items()}


def plan_pressure(
    view: ClusterView, node: str, settings: EvictionSettings, now: float
) -> Plan | Refusal:
    """One best-effort pod to evict from ``node`` to relieve its memory pressure: the
    lowest level first, then the one holding the most memory, then the least work lost
    (its gang along, where evicting it would break the gang). Only on a fresh report:
    stale or missing signals never lead to an eviction."""
    if node not in view.state.index:
        return Refusal(f"node {node} is not known")
    if node not in view.fresh:
        return Refusal(f"node {node} has no fresh report: stale signals never evict")
    refusal = _gate(view, node, settings, now)
    if refusal is not None:
        return refusal
    # As if displaced by a level above critical: every level but critical may go.
    rules = _Rules(view, Level.CRITICAL + settings.min_level_gap - 1, settings, now)
    picks = []
    for uid in view.on_node.get(node, ()):
        facts = rules.facts(uid)
        if not facts.request.batch:
            continue
        taken = rules.closure((uid,), None)
        if taken is not None:
            picks.append(((rules.level[uid], -view.held[uid].mem_b, rules.work[uid], uid), taken))
    if not picks:
        return Refusal(f"node {node}: no best-effort pod may be evicted")
    key, taken = min(picks, key=lambda p: p[0])
    chosen = (key[-1],)
    victims = rules.victims(taken, chosen, f"memory pressure on {node} (best-effort)")
    first = victims[0]
    return Plan(
        trigger="pressure",
        node=node,
        victims=victims,
        preemptor=None,
        queue=node,
        reason=f"memory pressure on {node}: evicting {first.namespace}/{first.name}"
        f" ({first.level.name.lower()}, holding the most memory of the lowest level)",
        needs_approval=False,
        cost=rules.cost(taken, chosen),
    )


# -------------------------------------------------------------------- internals


def _gate(view: ClusterView, queue: str, settings: EvictionSettings, now: float) -> Refusal | None:
    """The rules that refuse a round before any pod is looked at."""
    if not view.budgets_synced:
        return Refusal("PodDisruptionBudgets not listed yet: no eviction is known to be safe")
    until = view.cooldown_until.get(queue)
    if until is not None and now < until:
        # No count of seconds left: the reason is the Event's message, and a message that
        # changes every cycle is a new Event every cycle (the API server dedups by text).
        return Refusal(
            f"queue {queue} is cooling down after its last round"
            f" (one round per {settings.cooldown_s:g} s)"
        )
    return None


def _displacer(pod: PodFacts, settings: EvictionSettings) -> Level | Refusal:
    """The level ``pod`` displaces others from, or why it may displace no one."""
    level = level_of(pod, settings)
    if level - settings.min_level_gap < Level.LOW:
        return Refusal(
            f"{pod.key} is {level.name.lower()}: it may displace only pods"
            f" {settings.min_level_gap} levels below its own, and there are none"
        )
    return level


class _Rules:
    """The per-pod rules for one round, each worked out once per pod."""

    def __init__(
        self,
        view: ClusterView,
        displacer: int,
        settings: EvictionSettings,
        now: float,
        capped: bool = False,
    ) -> None:
        self.view = view
        self.displacer = displacer
        self.capped = capped
        """Only sets the executor's caps could ever let through whole (a preemption round
        is all or nothing): a larger plan would be held back every cycle, never run."""
        self.settings = settings
        self.now = now
        # What the rules work out per pod is worked out once per view (per displacer's
        # level where it depends on it): a round's plans share it, and a cluster of many
        # small pods has tens of thousands.
        memo = view.memo.setdefault(("rules", id(settings), now), {})
        self._allowed: dict[str, bool] = memo.setdefault(("allowed", displacer), {})
        self._budgets: dict[str, tuple[int, ...]] = memo.setdefault("budgets", {})
        self.level: dict[str, Level] = memo.setdefault("level", {})
        self.work: dict[str, float] = memo.setdefault("work", {})
        self._by_label: dict[tuple[str, str, str], list[int]] = {}
        """(namespace, label, value) → indices of the budgets whose selector's first
        ``matchLabels`` pair it is: only those can cover a pod with that label."""
        self._by_namespace: dict[str, list[int]] = {}
        """Namespace → indices of its budgets selecting by expressions only."""
        for k, budget in enumerate(view.budgets):
            first = next(iter(budget.match_labels.items()), None)
            if first is None:
                self._by_namespace.setdefault(budget.namespace, []).append(k)
            else:
                self._by_label.setdefault((budget.namespace, *first), []).append(k)

    def facts(self, uid: str) -> PodFacts:
        facts = self.view.pods[uid]
        if uid not in self.level:
            self.level[uid] = level_of(facts, self.settings)
            self.work[uid] = _work(facts, self.settings, self.now)
        return facts

    def budgets(self, uid: str) -> tuple[int, ...]:
        """Indices of the budgets covering the pod."""
        found = self._budgets.get(uid)
        if found is None:
            facts = self.facts(uid)
            budgets = self.view.budgets
            ns = facts.namespace
            maybe = [*self._by_namespace.get(ns, ())]
            for label in facts.labels.items():
                maybe.extend(self._by_label.get((ns, *label), ()))
            found = self._budgets[uid] = tuple(sorted(k for k in maybe if budgets[k].covers(facts)))
        return found

    def allowed(self, uid: str) -> bool:
        """Whether the pod may be evicted on its own account: the level gap, no
        checkpointing claim shielding it now, and at most one budget covering it (the
        Eviction API refuses a pod under two with a 500)."""
        ok = self._allowed.get(uid)
        if ok is None:
            self.facts(uid)
            ok = self._allowed[uid] = (
                self.displacer - self.level[uid] >= self.settings.min_level_gap
                and uid not in self.view.shielded
                and len(self.budgets(uid)) <= 1
            )
        return ok

    def closure(
        self, chosen: Sequence[str], within: frozenset[str] | None
    ) -> tuple[str, ...] | None:
        """The pods evicting ``chosen`` takes down: ``chosen`` and, for each gang that
        would fall below its ``minMember``, all its running members. None when one of
        them may not go, a budget would be overdrawn, or (``within``) a dragged member is
        not in it."""
        view = self.view
        taken = dict.fromkeys(chosen)
        counts: dict[str, int] = {}
        for uid in chosen:
            gang = view.pods[uid].gang
            if gang is not None:
                counts[gang] = counts.get(gang, 0) + 1
        for gang, evicted in counts.items():
            members = view.gangs.get(gang, ())
            need = max((m for u in members if (m := view.pods[u].gang_min)), default=None)
            if need is None or len(members) - evicted < need:
                taken.update(dict.fromkeys(members))
        if within is not None and not within.issuperset(taken):
            return None
        if not all(self.allowed(uid) for uid in taken):
            return None
        spent: dict[int, int] = {}
        for uid in taken:
            for k in self.budgets(uid):
                spent[k] = spent.get(k, 0) + 1
                if spent[k] > view.budgets[k].allowed:
                    return None
        if self.capped and not self._within_caps(tuple(taken)):
            return None
        return tuple(taken)

    def most_per_node(self) -> int:
        """The most victims on one node a set within the caps may have."""
        s = self.settings
        return min(s.max_per_node_per_cycle, s.max_per_cycle, s.eviction_burst)

    def _within_caps(self, taken: Sequence[str]) -> bool:
        """Whether a fresh cycle's caps and a full token bucket take the whole set:
        ``max_per_cycle``, ``eviction_burst``, ``max_per_node_per_cycle`` and
        ``max_per_namespace_per_cycle``."""
        s = self.settings
        if len(taken) > min(s.max_per_cycle, s.eviction_burst):
            return False
        nodes = Counter(self.view.held[u].node for u in taken)
        namespaces = Counter(self.view.pods[u].namespace for u in taken)
        return (
            max(nodes.values(), default=0) <= s.max_per_node_per_cycle
            and max(namespaces.values(), default=0) <= s.max_per_namespace_per_cycle
        )

    def cost(self, taken: Sequence[str], chosen: Sequence[str]) -> tuple[float, ...]:
        """(victims, sum of their levels, work lost since their checkpoints, gang members
        dragged along): the key a plan minimises, in that order."""
        return (
            float(len(taken)),
            float(sum(self.level[u] for u in taken)),
            sum(self.work[u] for u in taken),
            float(len(taken) - len(chosen)),
        )

    def victims(self, taken: Sequence[str], chosen: Sequence[str], why: str) -> tuple[Victim, ...]:
        view = self.view
        out = []
        for uid in taken:
            facts = self.facts(uid)
            level = self.level[uid]
            age = None if facts.checkpoint_at is None else max(0.0, self.now - facts.checkpoint_at)
            said = "no checkpoint known" if age is None else f"last checkpoint {age:.0f} s ago"
            reason = why if uid in chosen else f"gang {facts.gang} would fall below minMember"
            out.append(
                Victim(
                    uid=uid,
                    namespace=facts.namespace,
                    name=facts.name,
                    node=view.held[uid].node,
                    level=level,
                    priority=facts.priority,
                    queue=queue_of(view, facts, self.settings, self.now),
                    checkpoint_age_s=age,
                    gang=facts.gang,
                    reason=f"{reason} ({level.name.lower()}, {said})",
                )
            )
        return tuple(out)


def _work(facts: PodFacts, settings: EvictionSettings, now: float) -> float:
    """Seconds of work evicting the pod loses: since its last checkpoint, else since it
    started, else :attr:`EvictionSettings.unknown_work_s`."""
    since = facts.checkpoint_at if facts.checkpoint_at is not None else facts.started_at
    return max(0.0, now - since) if since is not None else settings.unknown_work_s


@dataclass(slots=True)
class _Node:
    row: int
    name: str
    candidates: list[str]
    """The pods worth weighing, cheapest first."""
    least: int
    """No set of fewer of them can free what the pod lacks here."""
    within: frozenset[str] | None


Found = dict[str, tuple[tuple[float, ...], tuple[Victim, ...]]]


def _search(
    rules: _Rules,
    pod: PodFacts,
    question: feasibility.Question,
    rows: npt.NDArray[np.int64],
    only: Mapping[str, frozenset[str]] | None,
    per_node: bool,
    why: str,
    deadline: Deadline,
) -> tuple[Found, bool]:
    """The cheapest valid set per node of ``rows`` (``per_node``) or overall, among sets
    after whose eviction Stowage's filter and kube-scheduler's filters (``question``)
    pass the pod on that node.

    Sets are tried by size, all nodes at once: for each size every valid set of every
    node still in the running becomes a row of a what-if state, and one call of the
    filter judges them all. A node leaves the running once the size passes its best set's
    victims (or, overall, the best set's anywhere), or its candidates run out; sizes below
    what its candidates could possibly free are skipped. Nodes the live signals refuse
    the pod on are left out first: what-if states keep those signals, so every set there
    would be refused (:func:`coordinator.scoring.livefilters.signal_refusals`).

    Every pod that could help is weighed, however many: the search is exact, and
    ``deadline`` bounds it instead, checked between sizes and every
    :data:`_CHECK_EVERY` sets, and :data:`_MAX_SETS` bounds it whatever the clock. The
    second value says whether it cut the search."""
    view = rules.view
    request = pod.request
    rows = rows[~livefilters.signal_refusals(view.state, request, rows, view.signals)]
    room = capacity.room(view.state, request, rows)
    short = np.stack(
        [
            request.cpu_m - room.cpu_free,
            request.mem_b - room.mem_free,
            request.gpus - room.gpus_with_room
            if room.gpus_with_room is not None
            else np.zeros(len(rows), dtype=np.int64),
        ],
        axis=1,
    ).tolist()
    nodes = []
    cut = False
    for k, (i, lacks) in enumerate(zip(rows.tolist(), short, strict=True)):
        if k % _CHECK_NODES_EVERY == 0 and k and deadline.passed():
            cut = True  # the nodes weighed so far get their first sets below
            break
        if (n := _node(rules, question, i, lacks, only)) is not None:
            nodes.append(n)
    best: dict[str, tuple[tuple[float, ...], tuple[str, ...], tuple[str, ...]]] = {}
    bar: tuple[float, ...] | None = None

    def judge_trial(trial: list[tuple[_Node, tuple[str, ...], tuple[str, ...], Cost]]) -> None:
        """One call of the filter for every set of ``trial``; the best set per node kept."""
        nonlocal bar
        released = [
            [view.held[u] for u in taken if view.held[u].node == node.name]
            for node, taken, _, _ in trial
        ]
        at = np.array([node.row for node, _, _, _ in trial], dtype=np.int64)
        after = given_back(view.state, at, released)
        found = judge(after, view.policy, pod.request, np.arange(len(at)), view.signals)
        for k in np.flatnonzero(~found.refused).tolist():
            node, taken, chosen, cost = trial[k]
            if not question.without(node.name, taken).fits:
                continue
            if node.name not in best or cost < best[node.name][0]:
                best[node.name] = (cost, taken, chosen)
                if bar is None or cost < bar:
                    bar = cost

    everyone = nodes
    size = 0
    tried = 0
    while nodes and not cut:
        if deadline.passed():
            cut = True
            break
        size += 1
        nodes = [
            n
            for n in nodes
            if size <= len(n.candidates)
            and (n.name not in best or size <= best[n.name][0][0])
            and (per_node or bar is None or size <= bar[0])
        ]
        trial: list[tuple[_Node, tuple[str, ...], tuple[str, ...], Cost]] = []
        for node in nodes:
            if size < node.least:
                continue
            limit = best[node.name][0] if node.name in best else None
            if not per_node and bar is not None and (limit is None or bar < limit):
                limit = bar
            for chosen in combinations(node.candidates, size):
                tried += 1
                if tried > _MAX_SETS or (tried % _CHECK_EVERY == 0 and deadline.passed()):
                    cut = True
                    break
                taken = rules.closure(chosen, node.within)
                if taken is None:
                    continue
                cost = rules.cost(taken, chosen)
                if limit is None or cost < limit:
                    trial.append((node, taken, chosen, cost))
            if cut:
                break  # the sets tried so far are still judged
        if trial:
            judge_trial(trial)
    if cut and not best:
        # Cut before any set was found (on a cluster of many small pods the search may not
        # even reach the size that could work): each node's first valid set of the least
        # size that could free enough, cheapest pods first — a plan, marked cut.
        judge_trial([t for node in everyone if (t := _first_set(rules, node)) is not None])
    if not per_node and best:
        name = min(best, key=lambda n: (best[n][0], n))
        best = {name: best[name]}
    found = {
        name: (cost, rules.victims(taken, chosen, why))
        for name, (cost, taken, chosen) in best.items()
    }
    return found, cut


Cost = tuple[float, ...]


def _first_set(
    rules: _Rules, node: _Node
) -> tuple[_Node, tuple[str, ...], tuple[str, ...], Cost] | None:
    """The first of ``node``'s sets of its least useful size that every rule allows
    (trying at most :data:`_FIRST_TRIES`), as a trial row; None when there is none."""
    size = min(node.least, len(node.candidates))
    for chosen in islice(combinations(node.candidates, size), _FIRST_TRIES):
        taken = rules.closure(chosen, node.within)
        if taken is not None:
            return node, taken, chosen, rules.cost(taken, chosen)
    return None


_CHECK_NODES_EVERY: Final = 64
"""Nodes whose candidates are weighed between two looks at the deadline (a node of many
small pods takes a millisecond or so)."""

_FIRST_TRIES: Final = 16
"""Sets a cut search's fallback tries per node for one every rule allows."""

_CHECK_EVERY: Final = 256
"""Sets tried between two looks at the deadline."""

_MAX_SETS: Final = 50_000
"""Sets one search tries at most, whatever its clock says: the deadline bounds a search
in time only while the clock moves (an injected clock may stand still, a coarse one may
jump late), and the largest report the schema admits offers more combinations than any
deadline could see through. At the ~10-20 us a set costs, about a second at most."""


def _node(
    rules: _Rules,
    question: feasibility.Question,
    i: int,
    short: list[int],
    only: Mapping[str, frozenset[str]] | None,
) -> _Node | None:
    """Node ``i``'s candidates: the pods on it that may go and free something the pod
    lacks there (``short``: CPU, memory, GPUs with room; or what kube-scheduler's
    resource fit lacks, the pod count included), or whose going could change another
    filter's answer (a host port, an anti-affinity, a spread count): a pod doing none
    only adds cost. Cheapest first; None when there are none."""
    view = rules.view
    name = view.state.names[i]
    within = None if only is None else only.get(name, frozenset())
    short_cpu, short_mem, short_gpus = short
    held = view.held
    pods = [u for u in view.on_node.get(name, ()) if within is None or u in within]
    if short_cpu > 0 or short_mem > 0 or short_gpus > 0:
        lacking = question.short(name)
        requests = view.snapshot.pods

        def frees(u: str) -> bool:
            if (
                (short_cpu > 0 and held[u].cpu_m)
                or (short_mem > 0 and held[u].mem_b)
                or (short_gpus > 0 and held[u].devices)
                or "pods" in lacking
            ):
                return True
            own = requests[u].requests if u in requests else {}
            return any(own.get(r, 0) > 0 for r in lacking) or question.matters(u)

        pods = [u for u in pods if frees(u)]
    pods = [u for u in pods if rules.allowed(u)]
    if not pods:
        return None
    pods.sort(key=lambda u: (rules.level[u], rules.work[u], u))
    least = 1
    for needed, amount in (
        (short_cpu, lambda u: held[u].cpu_m),
        (short_mem, lambda u: held[u].mem_b),
        (short_gpus, lambda u: len(held[u].devices)),
    ):
        if needed > 0:
            gains = 0
            for count, gain in enumerate(sorted(map(amount, pods), reverse=True), start=1):
                gains += gain
                if gains >= needed:
                    least = max(least, count)
                    break
            else:
                least = len(pods) + 1
    if least > len(pods) or (rules.capped and least > rules.most_per_node()):
        return None  # no set of these pods frees enough, or none the caps let through
    return _Node(row=i, name=name, candidates=pods, least=least, within=within)
