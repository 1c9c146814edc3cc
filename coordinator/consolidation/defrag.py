"""GPU defragmentation by migration: room for a pending multi-GPU pod that fits nowhere,
made by moving a few smaller GPU pods to other nodes.

A cluster's churn leaves GPUs free in ones and twos on many nodes: an 8-GPU pod finds no
node with 8 free while dozens are idle. Preemption would end pods to make room; a
migration moves them instead — each moved pod is evicted and its controller recreates it,
and the plan has checked that it fits on another node. :func:`plan_migration` finds the
smallest such migration:

* **who may be moved**: GPU pods holding fewer GPUs than the pending pod asks for, each
  with a controller to recreate it, none above ``defrag.max_level`` nor above the
  pending pod's own level (its ``spec.priority``; a label may only lower it), none
  shielded by a checkpointing claim, none under two PodDisruptionBudgets — the eviction
  planner's rules (:class:`coordinator.eviction.plan._Rules`), asked, not copied. A gang
  that would fall below ``minMember`` moves whole (its members elsewhere are moved too);
  the budgets' ``disruptionsAllowed`` and one cycle's ``evictions.*`` caps cover the whole
  set, so the executor can carry it out in one round;
* **the pending pod fits** on the node the moved pods leave, by Stowage's filter and
  kube-scheduler's filters (:mod:`coordinator.feasibility`) — asked once more with the
  moved pods in their new places (a spread or affinity term may count them);
* **every moved pod fits elsewhere**: on a node that no moved pod leaves, that the
  pending pod is not given and that no plan of the round promised, by both filters,
  the moves placed one after another on one working copy of the cluster
  (:class:`coordinator.consolidation.placer.Placer`), so two moves never count on the
  same room. The destinations are tried in turn (the policy's best first), backtracking:
  where some assignment of the moved pods fits, it is found;
* **smallest**: the fewest pods moved, then the eviction planner's cost — the sum of
  their levels, the work lost since their last checkpoints (a pod that just wrote one
  loses least), gang members dragged along.

Bounded: sets are tried by size, at most ``defrag.max_moves`` pods; ``deadline`` is
looked at every :data:`_CHECK_EVERY` sets and before each destination is tried, and
:data:`_MAX_SETS` sets and :data:`_MAX_STEPS` destinations bound the search whatever the
clock says (a 64-GPU node of the largest report the schema admits, each GPU holding a
pod, offers billions of sets). A search cut short answers the smallest migration found
by then, marked :attr:`~coordinator.eviction.answers.Plan.cut`.

:func:`choose` leaves a pod to preemption when the eviction planner would make its room
evicting no more pods than the migration moves.

Pure: reads a :class:`~coordinator.eviction.view.ClusterView` and changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Final

import numpy as np

from coordinator import feasibility
from coordinator.config import DefragSettings, EvictionSettings
from coordinator.consolidation.drain import Move, largest_first
from coordinator.consolidation.placer import Placer
from coordinator.eviction.answers import (
    NO_DEADLINE,
    Deadline,
    Level,
    Plan,
    Refusal,
    level_of,
    queue_of,
)
from coordinator.eviction.plan import _gate, _Rules, plan_preemption
from coordinator.eviction.view import ClusterView, given_back
from coordinator.live.decisions import judge
from coordinator.scoring import capacity, livefilters
from coordinator.state.cluster import Placement
from coordinator.state.podfacts import PodFacts

TRIGGER: Final = "defrag"


@dataclass(frozen=True, slots=True)
class Migration:
    """Where the pending pod goes and which pods move where to let it."""

    pod: str
    """The pending pod, ``ns/name``."""
    node: str
    moves: tuple[Move, ...]
    plan: Plan
    """The round for the executor: the moved pods are its victims; ``plan.node`` is
    where the pending pod is nominated once they are gone."""


def choose(
    view: ClusterView,
    pod: PodFacts,
    settings: DefragSettings,
    evictions: EvictionSettings,
    now: float,
    deadline: Deadline = NO_DEADLINE,
) -> Migration | Refusal:
    """:func:`plan_migration`, unless preemption (:func:`plan_preemption`) makes the
    pod's room evicting no more pods than the migration moves: then the eviction cycle's
    preemption is the answer, and this refuses."""
    migration = plan_migration(view, pod, settings, evictions, now, deadline)
    if isinstance(migration, Refusal):
        return migration
    preemption = plan_preemption(view, pod, evictions, now, deadline)
    if isinstance(preemption, Plan) and len(preemption.victims) <= len(migration.moves):
        return Refusal(
            f"preemption makes room for {pod.key} on {preemption.node} evicting"
            f" {len(preemption.victims)} pod(s), no more than the {len(migration.moves)}"
            " a migration would move: the eviction cycle preempts"
        )
    return migration


def plan_migration(
    view: ClusterView,
    pod: PodFacts,
    settings: DefragSettings,
    evictions: EvictionSettings,
    now: float,
    deadline: Deadline = NO_DEADLINE,
) -> Migration | Refusal:
    """The smallest migration that lets the pending ``pod`` run (see the module), or why
    there is none; ``now`` is Unix seconds (checkpoints, cooldowns)."""
    request = pod.request
    if request.gpus < settings.min_gpus:
        return Refusal(
            f"{pod.key} requests {request.gpus} GPU(s): migrations are planned for pods"
            f" of {settings.min_gpus} or more (defrag.min_gpus)"
        )
    queue = queue_of(view, pod, evictions, now)
    refusal = _gate(view, queue, evictions, now)
    if refusal is not None:
        return refusal
    question = feasibility.Question(pod.scheduling, view.snapshot)
    barred = question.barred()
    if barred is not None:
        return Refusal(barred)
    targets = _targets(view, pod, question)
    if isinstance(targets, Refusal):
        return targets
    level = level_of(pod, evictions)
    ceiling = min(level, Level[settings.max_level.upper()])
    rules = _Rules(view, ceiling + evictions.min_level_gap, evictions, now, capped=True)
    search = _Search(view, pod, question, rules, settings, deadline)
    search.run(targets)
    if search.best is None:
        if search.cut:
            return Refusal(f"no migration for {pod.key} found before the search was cut")
        return Refusal(
            f"no migration of up to {settings.max_moves} pod(s) (defrag.max_moves) at or"
            f" below {ceiling.name.lower()} makes room for {pod.key}"
        )
    cost, node, taken, chosen, homes = search.best
    where = dict(homes)
    why = f"moved to make room for {pod.key} ({level.name.lower()}) on {node}"
    victims = tuple(
        dataclasses.replace(v, reason=f"moves to {where[v.uid]}: {v.reason}")
        for v in rules.victims(taken, chosen, why)
    )
    moves = tuple(Move(u, view.pods[u].key, where[u]) for u in taken)
    said = ", ".join(f"{m.pod} to {m.destination}" for m in moves)
    plan = Plan(
        trigger=TRIGGER,
        node=node,
        victims=victims,
        preemptor=pod.key,
        queue=queue,
        reason=(
            f"{pod.key} ({level.name.lower()}) fits on {node} once {len(moves)} pod(s)"
            f" move: {said}"
            + ("; the search was cut: a smaller migration may exist" if search.cut else "")
        ),
        needs_approval=evictions.queue_weights.get(queue, 0) > evictions.approval_weight_above,
        cost=cost,
        cut=search.cut,
        preemptor_uid=pod.uid,
    )
    return Migration(pod.key, node, moves, plan)


# ------------------------------------------------------------------ the search


def _targets(
    view: ClusterView, pod: PodFacts, question: feasibility.Question
) -> list[int] | Refusal:
    """The rows of the nodes the pod could run on once pods move off (Stowage's filter
    refuses it there only for room, kube-scheduler's static filters pass it, no plan of
    the round promised it, the live signals do not refuse it); a refusal when it fits
    somewhere already or nowhere could take it."""
    state = view.state
    everywhere = np.arange(len(state), dtype=np.int64)
    found = judge(state, view.policy, pod.request, everywhere, view.signals)
    for i in np.flatnonzero(~found.refused).tolist():
        if question.without(state.names[i]).fits:
            return Refusal(f"{pod.key} fits on {state.names[i]} without moving anyone")
    rows = np.array(
        [
            i
            for i in np.flatnonzero(~found.unresolvable).tolist()
            if state.names[i] not in view.promised and question.static(state.names[i]).fits
        ],
        dtype=np.int64,
    )
    rows = rows[~livefilters.signal_refusals(state, pod.request, rows, view.signals)]
    if not len(rows):
        return Refusal(f"no node could take {pod.key} even with pods moved off it")
    return [int(i) for i in rows]


Cost = tuple[float, ...]
Best = tuple[Cost, str, tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...]]
"""(cost, node, moved pods, the pods chosen (the rest are gang members dragged), each
moved pod's destination)."""


class _Cut(Exception):
    """The deadline or a bound stopped the search."""


@dataclass(slots=True)
class _Target:
    row: int
    name: str
    movable: list[str]
    """The pods on it that may move, cheapest first."""
    least: int
    """No set of fewer of them frees the GPUs the pod lacks there."""


class _Search:
    def __init__(
        self,
        view: ClusterView,
        pod: PodFacts,
        question: feasibility.Question,
        rules: _Rules,
        settings: DefragSettings,
        deadline: Deadline,
    ) -> None:
        self.view = view
        self.pod = pod
        self.question = question
        self.rules = rules
        self.settings = settings
        self.deadline = deadline
        self.best: Best | None = None
        self.cut = False
        self.sets = 0
        self.steps = 0
        self._placer: Placer | None = None

    def run(self, rows: Sequence[int]) -> None:
        targets = [t for i in rows if (t := self._target(i)) is not None]
        try:
            for size in range(1, self.settings.max_moves + 1):
                if self.best is not None and size > self.best[0][0]:
                    return  # a set of this many chosen moves at least this many pods
                if self.deadline.passed():
                    raise _Cut
                for target in targets:
                    if target.least <= size <= len(target.movable):
                        self._try(target, size)
        except _Cut:
            self.cut = True

    def _target(self, i: int) -> _Target | None:
        view, rules = self.view, self.rules
        request = self.pod.request
        name = view.state.names[i]
        movable = [
            u
            for u in view.on_node.get(name, ())
            if not view.pods[u].daemon
            and view.pods[u].controlled
            and 0 < len(view.held[u].devices) < request.gpus
            and rules.allowed(u)
        ]
        if not movable:
            return None
        movable.sort(key=lambda u: (rules.level[u], rules.work[u], u))
        room = capacity.room(view.state, request, np.array([i], dtype=np.int64))
        with_room = 0 if room.gpus_with_room is None else int(room.gpus_with_room[0])
        short = request.gpus - with_room
        least, freed = 0, 0
        for gain in sorted((len(view.held[u].devices) for u in movable), reverse=True):
            if freed >= short:
                break
            freed += gain
            least += 1
        if freed < short:
            return None
        return _Target(i, name, movable, max(1, least))

    def _try(self, target: _Target, size: int) -> None:
        """Every set of ``size`` of ``target``'s pods that the rules allow and that could
        beat the best so far; the one-call filter judges them all, and the cheapest that
        frees room and whose pods all find homes becomes the best."""
        rules = self.rules
        trial: list[tuple[Cost, tuple[str, ...], tuple[str, ...]]] = []
        for chosen in combinations(target.movable, size):
            self.sets += 1
            if self.sets > _MAX_SETS or (self.sets % _CHECK_EVERY == 0 and self.deadline.passed()):
                self._judge(target, trial)
                raise _Cut
            taken = rules.closure(chosen, None)
            if taken is None or len(taken) > self.settings.max_moves:
                continue
            cost = rules.cost(taken, chosen)
            if self.best is None or cost < self.best[0]:
                trial.append((cost, taken, chosen))
        self._judge(target, trial)

    def _judge(
        self, target: _Target, trial: list[tuple[Cost, tuple[str, ...], tuple[str, ...]]]
    ) -> None:
        if not trial:
            return
        view = self.view
        released = [
            [view.held[u] for u in taken if view.held[u].node == target.name]
            for _, taken, _ in trial
        ]
        at = np.full(len(trial), target.row, dtype=np.int64)
        after = given_back(view.state, at, released)
        found = judge(after, view.policy, self.pod.request, np.arange(len(at)), view.signals)
        room = sorted(
            (trial[k] for k in np.flatnonzero(~found.refused).tolist()),
            key=lambda t: t[0],
        )
        for cost, taken, chosen in room:
            if self.best is not None and not cost < self.best[0]:
                return
            if not self.question.without(target.name, taken).fits:
                continue  # no use looking for homes: the last check would refuse it
            homes = self._rehome(target.name, taken)
            if homes is not None:
                self.best = (cost, target.name, taken, chosen, homes)
                return

    # -------------------------------------------------------------- the moves

    def _rehome(self, node: str, taken: tuple[str, ...]) -> tuple[tuple[str, str], ...] | None:
        """A destination for each of ``taken`` (largest first) on a node no moved pod
        leaves, other than ``node`` and the round's promised nodes, both filters passing
        each, every move taking its room; checked at the end with the pending pod on
        ``node`` and the moves made. None when no assignment fits."""
        view = self.view
        if self._placer is None:
            self._placer = Placer(view, closed=set())
        placer = self._placer
        placer.closed = {*view.promised, *(view.held[u].node for u in taken)}  # ``node`` too
        order = sorted(taken, key=lambda u: largest_first(view, u))
        originals = placer.lift(taken)
        placed: list[tuple[str, Placement]] = []
        try:
            found = self._assign(placer, node, order, placed)
        finally:
            homes = tuple((u, view.state.names[p.node]) for u, p in placed)
            for uid, placement in reversed(placed):
                placer.give_back(uid, placement)
            placer.restore(originals)
        return homes if found else None

    def _assign(
        self, placer: Placer, node: str, order: list[str], placed: list[tuple[str, Placement]]
    ) -> bool:
        if len(placed) == len(order):
            moved = feasibility.Snapshot(placer.snapshot.nodes, placer.pods)
            return feasibility.Question(self.pod.scheduling, moved).without(node).fits
        uid = order[len(placed)]
        rows = placer.homes(uid)
        if isinstance(rows, str):
            return False
        for row in rows:
            self.steps += 1
            if self.steps > _MAX_STEPS or self.deadline.passed():
                raise _Cut
            taken = placer.take(uid, row)
            if not isinstance(taken, Placement):
                continue
            placed.append((uid, taken))
            if self._assign(placer, node, order, placed):
                return True
            placed.pop()
            placer.give_back(uid, taken)
        return False


_CHECK_EVERY: Final = 256
"""Sets tried between two looks at the deadline."""

_MAX_SETS: Final = 20_000
"""Sets one search tries at most, whatever its clock says: a node of the largest report
the schema admits (64 GPUs, a pod on each) offers C(64, 8), some 4·10⁹, sets of 8. A set
that frees room costs a fraction of a millisecond (its moved pods looked for homes):
seconds at most, in the planning child."""

_MAX_STEPS: Final = 2_000
"""Destinations one search tries at most for the moved pods (each asks kube-scheduler's
filters over a fresh snapshot of the bound pods: milliseconds on a large cluster)."""
