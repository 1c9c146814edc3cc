"""One cycle's planning, over a frozen copy of the live cluster.

:func:`plan_round` is what the leader's cycle (:mod:`coordinator.eviction.cycle`) runs in
a forked child (:mod:`coordinator.forked`): the child's copy of the cluster is the
snapshot, so the watches' events after the fork never reach a plan half made, and the
search — up to ``plan_deadline_s`` a plan, ``cycle_budget_s`` a cycle — never holds the
event loop the extender answers from. The copy is the child's own, so it may be changed:
the pods nominated to a node are counted there first
(:meth:`coordinator.live.LiveCluster.hold_nominations`), which keeps them out of the
victims and out of the pending pods, and keeps their room from being promised again.
Within the round, a node one plan promised to its preemptor gets no other preemption
plan (:attr:`~coordinator.eviction.view.ClusterView.promised`).

**Bounded planning.** Each plan's search stops at ``plan_deadline_s`` (the plan says it
was cut) and the round at ``cycle_budget_s``; the pending pods it did not reach are
planned first in the next round. Both on the cluster's injected monotonic clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from coordinator.eviction.answers import Deadline, Plan, Refusal
from coordinator.eviction.plan import plan_preemption, plan_pressure
from coordinator.eviction.view import view_of
from coordinator.live import LiveCluster
from coordinator.state.podfacts import PodFacts


@dataclass(frozen=True, slots=True)
class Outcome:
    trigger: str
    """``"preemption"`` or ``"pressure"``."""
    subject: str
    """The pending pod (``ns/name``) or the node."""
    answer: Plan | Refusal


@dataclass(frozen=True, slots=True)
class Round:
    outcomes: tuple[Outcome, ...]
    deferred: tuple[str, ...]
    """Pending pods (``ns/name``) the budget left unplanned: first in the next round."""


def plan_round(
    cluster: LiveCluster,
    cooling: Mapping[str, float],
    deferred: Sequence[str],
    pressured: Sequence[str],
    now: float,
) -> Round:
    """Plans for every pending pod that fits nowhere (those of ``deferred`` first) and for
    every node of ``pressured``; ``now`` is Unix seconds. Changes ``cluster``: call it on
    a copy."""
    settings = cluster.settings.evictions
    cluster.hold_nominations()
    view = view_of(cluster, cooling)
    if view is None:
        return Round((), ())
    clock = cluster.clock.monotonic
    budget_until = clock() + settings.cycle_budget_s
    first = {key: k for k, key in enumerate(deferred)}
    pending = sorted(_pending(cluster), key=lambda p: (first.get(p.key, len(first)), p.key))
    outcomes = []
    left: tuple[str, ...] = ()
    for k, pod in enumerate(pending):
        if clock() >= budget_until:
            left = tuple(p.key for p in pending[k:])
            break
        deadline = Deadline(clock, min(clock() + settings.plan_deadline_s, budget_until))
        answer = plan_preemption(view, pod, settings, now, deadline)
        if isinstance(answer, Plan):
            view = dataclasses.replace(view, promised=view.promised | {answer.node})
        outcomes.append(Outcome("preemption", pod.key, answer))
    for node in pressured:
        outcomes.append(Outcome("pressure", node, plan_pressure(view, node, settings, now)))
    return Round(tuple(outcomes), left)


def outdated(cluster: LiveCluster, plan: Plan) -> str | None:
    """Why ``plan``, made over a snapshot, no longer holds on the live cluster now — its
    preemptor bound or gone, a victim gone or elsewhere — or None while it does."""
    if plan.preemptor_uid is not None:
        facts = cluster.facts.get(plan.preemptor_uid)
        if facts is None or facts.node is not None:
            return f"{plan.preemptor} was bound or deleted while its plan was made"
    for victim in plan.victims:
        held = cluster.held.get(victim.uid)
        if held is None:  # gone (a pod never moves to another node)
            return f"{victim.namespace}/{victim.name} left {victim.node} while the plan was made"
    return None


def _pending(cluster: LiveCluster) -> list[PodFacts]:
    """Pods on no node that the extender has not just placed either (an assumed pod is
    about to be bound) and that no room is held for (a nominee waits for its own)."""
    held = cluster.held
    return [f for f in cluster.facts.values() if f.node is None and f.uid not in held]
