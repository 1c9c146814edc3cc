"""Drain plans: which of the patrol's candidates can be emptied now, and where each of
their pods would go.

A node is drainable only if every pod on it may be evicted and fits on another node,
under the rules the eviction planner evicts by (:mod:`coordinator.eviction.plan`'s rules,
asked, not copied):

* **levels**: no pod above ``drain.max_level`` (its ``spec.priority``; a label may only
  lower it), none shielded by a checkpointing claim, none under two PodDisruptionBudgets;
* **a controller**: every pod has one to recreate it (``kubectl drain`` refuses bare pods
  too); evicting a bare pod would end it, not move it;
* **PDBs**: the budgets' ``disruptionsAllowed`` cover every drain of the plan together;
* **gangs**: a gang that would fall below ``minMember`` must lie wholly on the node (it
  moves whole); one with members elsewhere would be broken, and blocks the drain;
* **caps**: the plan's evictions all fit one cycle's caps (``evictions.max_per_cycle``,
  ``max_per_node_per_cycle``, ``max_per_namespace_per_cycle``, ``eviction_burst``), so no
  node is left half-drained by a cap;
* **fit**: each pod, largest first, goes where Stowage's filter passes it and the policy
  scores it best, among the nodes kube-scheduler's filters also pass it on
  (:mod:`coordinator.feasibility`). Pods are placed one after another on one working
  copy of the cluster, each taking its room before the next is placed, so two pods never
  count on the same hole; a node that receives a pod is not drained in the same plan,
  and no pod goes to a node draining or drained by it (another candidate may take pods:
  that is how two half-empty nodes become one).

DaemonSet and mirror pods stay (``kubectl drain --ignore-daemonsets``). Nodes draining
already (tainted :data:`DISRUPTED`) are planned first; a new one only while fewer than
``drain.max_draining`` drain and its node group's budget
(:mod:`coordinator.consolidation.budgets`) has room. Candidates are judged in the
order given (the patrol's emptiest first), each once: the work is bounded by pods × nodes,
and by ``deadline`` besides, checked before each pod is placed.

Pure: reads a :class:`~coordinator.eviction.view.ClusterView` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from coordinator import feasibility
from coordinator.config import DrainSettings, EvictionSettings
from coordinator.consolidation import budgets
from coordinator.consolidation.placer import Placer
from coordinator.eviction.answers import NO_DEADLINE, Deadline, Level, Plan
from coordinator.eviction.plan import _Rules
from coordinator.eviction.view import ClusterView
from coordinator.state.cluster import Placement

DISRUPTED: Final = "stowage.io/disrupted"
"""The ``NoSchedule`` taint a node gets before its pods move (Karpenter's
``karpenter.sh/disrupted``): nothing new lands on a node being emptied."""
TRIGGER: Final = "consolidation"


@dataclass(frozen=True, slots=True)
class Move:
    """One pod of a drain and the node the simulation put it on."""

    uid: str
    pod: str
    """``ns/name``."""
    destination: str


@dataclass(frozen=True, slots=True)
class Drain:
    """A node the plan empties."""

    node: str
    group: str
    draining: bool
    """Tainted :data:`DISRUPTED` already: a drain under way."""
    moves: tuple[Move, ...]
    plan: Plan | None
    """The eviction round for the executor; None when no pod needs to move."""


@dataclass(frozen=True, slots=True)
class Blocked:
    """A candidate the plan does not empty, and why."""

    node: str
    draining: bool
    reason: str


@dataclass(frozen=True, slots=True)
class DrainPlan:
    drains: tuple[Drain, ...]
    blocked: tuple[Blocked, ...]
    cut: bool = False
    """The deadline stopped the planning: the candidates not reached are blocked so."""


def draining(nodes: Mapping[str, feasibility.Node]) -> list[str]:
    """The nodes tainted :data:`DISRUPTED` now, by name."""
    return sorted(n for n, node in nodes.items() if any(t.key == DISRUPTED for t in node.taints))


def plan_drains(
    view: ClusterView,
    candidates: Sequence[str],
    settings: DrainSettings,
    evictions: EvictionSettings,
    now: float,
    deadline: Deadline = NO_DEADLINE,
) -> DrainPlan:
    """The drains of ``candidates`` (and of the nodes draining already) that every rule
    allows now, and why each other candidate is not drainable; ``now`` is Unix seconds
    (checkpoints, budget windows)."""
    under_way = draining(view.nodes)
    order = [*under_way, *(n for n in dict.fromkeys(candidates) if n not in under_way)]
    displacer = Level[settings.max_level.upper()] + evictions.min_level_gap
    rules = _Rules(view, displacer, evictions, now, capped=True)
    placer = _Drains(view, closed=set(under_way))
    drains: list[Drain] = []
    blocked: list[Blocked] = []
    evicted: list[str] = []  # every drain's pods so far: budgets and caps hold for all
    cut = False
    for node in order:
        tainted = node in under_way
        if not cut and deadline.passed():
            cut = True
        if cut:
            blocked.append(Blocked(node, tainted, _LATE))
            continue
        pods = sorted(
            (u for u in view.on_node.get(node, ()) if not view.pods[u].daemon),
            key=lambda u: largest_first(view, u),
        )
        why = _refused_node(view, node, tainted or not pods, drains, placer, settings, now)
        if why is not None:
            blocked.append(Blocked(node, tainted, why))
            continue
        group = _group(view, node, settings)
        if not pods:
            placer.closed.add(node)
            drains.append(Drain(node, group, tainted, (), None))
            continue
        why = _refused_pods(rules, view, evictions, evicted, pods)
        if why is not None:
            blocked.append(Blocked(node, tainted, why))
            continue
        placed = placer.drain(node, pods, deadline)
        if isinstance(placed, str):
            blocked.append(Blocked(node, tainted, placed))
            cut = placed == _LATE
            continue
        evicted.extend(pods)
        moves = tuple(Move(u, view.pods[u].key, dest) for u, dest in placed)
        where = ", ".join(f"{m.pod} to {m.destination}" for m in moves)
        reason = (
            f"drain {node} (consolidation candidate): {len(moves)} pod(s) fit elsewhere: {where}"
        )
        plan = Plan(
            trigger=TRIGGER,
            node=node,
            victims=rules.victims(pods, pods, f"drain of {node}"),
            preemptor=None,
            queue=node,
            reason=reason,
            needs_approval=False,
            cost=rules.cost(pods, pods),
        )
        drains.append(Drain(node, group, tainted, moves, plan))
    return DrainPlan(tuple(drains), tuple(blocked), cut)


_LATE: Final = "not planned before the planning deadline"

# ------------------------------------------------------------------ the rules


def _group(view: ClusterView, node: str, settings: DrainSettings) -> str:
    return view.nodes[node].labels.get(settings.group_label, "")


def _refused_node(
    view: ClusterView,
    node: str,
    exempt: bool,
    drains: Sequence[Drain],
    placer: _Drains,
    settings: DrainSettings,
    now: float,
) -> str | None:
    """Why ``node`` may not be drained whatever its pods: unknown, it takes pods of an
    earlier drain, or (a new drain, not ``exempt``: under way already, or with nothing
    to move) a round on it cooling down (a drain's, or pressure's: a replica's shared
    cooldowns included), the cap on draining nodes or its group's budget."""
    if node not in view.nodes or node not in view.state.index:
        return f"node {node} is not known"
    if node in placer.received:
        return f"{node} takes pods moved off other nodes in this plan"
    if exempt:
        return None
    if view.cooldown_until.get(node, 0.0) > now:  # keyed by node, as a drain's round is
        return f"{node} is cooling down after its last round (evictions.cooldown_s)"
    moving = [d for d in drains if d.plan is not None]  # a node emptied already is done
    if len(moving) >= settings.max_draining:
        return f"drain.max_draining: {settings.max_draining} node(s) draining already"
    group = _group(view, node, settings)
    size = sum(1 for n in view.nodes.values() if n.labels.get(settings.group_label, "") == group)
    allowed = budgets.allowed(settings, group, size, now)
    busy = sum(1 for d in moving if d.group == group)
    if allowed is not None and busy >= allowed:
        named = f"node group {group}" if group else "the nodes without a node group"
        return f"the drain budget of {named} lets {allowed} of its {size} node(s) drain now"
    return None


def _refused_pods(
    rules: _Rules,
    view: ClusterView,
    evictions: EvictionSettings,
    evicted: Sequence[str],
    pods: Sequence[str],
) -> str | None:
    """Why ``pods`` may not all be evicted beside ``evicted`` (the plan's earlier drains):
    a pod's level or checkpoint, a gang with members elsewhere, a PDB, the caps."""
    for uid in pods:
        if not view.pods[uid].controlled:
            return f"{view.pods[uid].key} has no controller: nothing would recreate it elsewhere"
        if not rules.allowed(uid):
            return _why_not(rules, view, uid)
    together = (*evicted, *pods)
    if rules.closure(together, frozenset(together)) is not None:
        return None
    alone = rules.closure(pods, None)
    if alone is not None and not set(alone) <= set(pods):
        gang = next(view.pods[u].gang for u in alone if u not in pods)
        return f"gang {gang} would fall below minMember: it has members on other nodes"
    uncapped = _Rules(view, rules.displacer, evictions, rules.now)
    if uncapped.closure(together, frozenset(together)) is not None:
        return (
            f"{len(pods)} eviction(s) (with the plan's earlier drains, {len(together)}) exceed"
            " one cycle's caps (evictions.max_per_cycle, max_per_node_per_cycle,"
            " max_per_namespace_per_cycle, eviction_burst)"
        )
    covering = sorted({view.budgets[k].key for u in pods for k in rules.budgets(u)})
    return f"PodDisruptionBudget(s) {', '.join(covering)} allow too few disruptions"


def _why_not(rules: _Rules, view: ClusterView, uid: str) -> str:
    facts = view.pods[uid]
    if uid in view.shielded:
        return f"{facts.key} is writing a checkpoint (stowage.io/checkpointing)"
    if len(rules.budgets(uid)) > 1:
        return f"{facts.key} is covered by more than one PodDisruptionBudget (none may evict it)"
    level = rules.level[uid].name.lower()
    return f"{facts.key} is {level}: a drain moves pods up to drain.max_level only"


def largest_first(view: ClusterView, uid: str) -> tuple[int, int, int, str]:
    """Largest first: GPUs, then CPU, then memory (first-fit decreasing)."""
    r = view.pods[uid].request
    return (-r.gpus, -r.cpu_m, -r.mem_b, uid)


# ------------------------------------------------------------------ placement


class _Drains(Placer):
    """The plan's working copy of the cluster (:class:`Placer`): each drained node's pods
    placed, its node closed to every later pod."""

    def drain(
        self, node: str, pods: Sequence[str], deadline: Deadline
    ) -> list[tuple[str, str]] | str:
        """Each of ``pods`` (on ``node``) with its destination, taking its room; or why
        one fits nowhere (:data:`_LATE`: the deadline passed first), with nothing taken."""
        was_closed = node in self.closed
        self.closed.add(node)
        originals = self.lift(pods)
        taken: list[tuple[str, str, Placement]] = []
        failure = None
        for uid in pods:
            if deadline.passed():
                failure = _LATE
                break
            found = self.place(uid)
            if isinstance(found, str):
                failure = f"{self.view.pods[uid].key} fits on no other node: {found}"
                break
            taken.append((uid, *found))
        if failure is None:
            self.received.update(dest for _, dest, _ in taken)
            return [(uid, dest) for uid, dest, _ in taken]
        for uid, _, placement in taken:  # put back what the drain took
            self.give_back(uid, placement)
        self.restore(originals)
        if not was_closed:
            self.closed.discard(node)
        return failure
