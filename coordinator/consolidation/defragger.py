"""The leader acting on migrations (``defrag.enabled``), once per eviction cycle, after
the preemption round and the drains, through the eviction executor only — so a
migration's evictions are dry runs until ``evictions.enabled``, within the cycle's caps
and rate, one round per queue per ``evictions.cooldown_s``, loop-prevented, approved
first where the pending pod's queue asks for approval, and every API call fenced by the
lease.

Per cycle: every pending pod of ``defrag.min_gpus`` GPUs or more gets
:func:`coordinator.consolidation.defrag.choose` — a migration only where preemption
cannot place it, or would evict more pods than the migration moves — planned in a forked
child over its frozen copy of the cluster (:mod:`coordinator.forked`), as the eviction
cycle plans, within ``evictions.cycle_budget_s`` (``plan_deadline_s`` a pod). Within a
round a migration's node and its moves' destinations are promised: no later plan of the
round counts on their room. A migration whose pods moved or whose pending pod was bound
meanwhile is dropped and planned again next cycle.

Once the executor has carried a migration out (every moved pod evicted, not in dry
run), the pending pod is nominated to the node it was made room on
(:mod:`coordinator.live.nominations`), as a preemption's is: every replica's filter
holds that room for it; and each moved pod's destination is reserved for its
replacement (:mod:`coordinator.consolidation.reserver`) right before the executor gets
the round, since the controller recreates the pod the moment it is evicted: every
replica's filter steers the replacement there and keeps other pods off that room. A dry
run reserves nothing. A
pod that gets no migration is told why once per reason, by an ``EvictionNotPlanned``
Event on it (``defrag: …``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from common.clock import Clock
from coordinator.config import DefragSettings, EvictionSettings
from coordinator.consolidation.defrag import TRIGGER, Migration, choose
from coordinator.consolidation.reserver import Reserver
from coordinator.eviction.answers import Deadline, Plan, Refusal
from coordinator.eviction.cycle import CHILD_GRACE_S, PLANNER_NICE
from coordinator.eviction.executor import Executor
from coordinator.eviction.round import _pending, outdated
from coordinator.eviction.view import ClusterView, view_of
from coordinator.forked import ChildFailed, run_forked
from coordinator.live import LiveCluster
from coordinator.state.podfacts import PodFacts

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Answer:
    pod: str
    """The pending pod, ``ns/name``."""
    answer: Migration | Refusal


@dataclass(frozen=True, slots=True)
class Round:
    answers: tuple[Answer, ...]
    cut: bool = False
    """``cycle_budget_s`` ran out before every pending pod was planned."""


def waiting(cluster: LiveCluster, settings: DefragSettings) -> list[PodFacts]:
    """The pending pods a migration could be for, by name: the eviction cycle's pending
    pods (on no node, held nowhere: an assumed pod is about to bind, a nominee waits for
    its room) of ``defrag.min_gpus`` GPUs or more."""
    found = (f for f in _pending(cluster) if f.request.gpus >= settings.min_gpus)
    return sorted(found, key=lambda f: f.key)


def plan_round(
    view: ClusterView,
    pods: Sequence[PodFacts],
    settings: DefragSettings,
    evictions: EvictionSettings,
    now: float,
    clock: Callable[[], float],
) -> Round:
    """:func:`choose` for each of ``pods`` in turn over ``view``, each migration's node
    and destinations promised to it before the next is planned; ``now`` is Unix seconds,
    ``clock`` the monotonic clock the budgets run on."""
    until = clock() + evictions.cycle_budget_s
    answers: list[Answer] = []
    for pod in pods:
        if clock() >= until:
            return Round(tuple(answers), cut=True)
        deadline = Deadline(clock, min(clock() + evictions.plan_deadline_s, until))
        answer = choose(view, pod, settings, evictions, now, deadline)
        if isinstance(answer, Migration):
            taken = {answer.node, *(m.destination for m in answer.moves)}
            view = dataclasses.replace(view, promised=view.promised | taken)
        answers.append(Answer(pod.key, answer))
    return Round(tuple(answers))


def _plan(
    cluster: LiveCluster,
    cooling: Mapping[str, float],
    settings: DefragSettings,
    evictions: EvictionSettings,
) -> Round:
    """The round over ``cluster`` as it is (in the planning child: its own copy, which
    may be changed — the nominated pods are counted where their room is held)."""
    cluster.hold_nominations()
    view = view_of(cluster, cooling)
    if view is None:
        return Round(())
    clock = cluster.clock
    pods = waiting(cluster, settings)
    return plan_round(view, pods, settings, evictions, clock.wall(), clock.monotonic)


class Defragger:
    def __init__(
        self,
        settings: DefragSettings,
        evictions: EvictionSettings,
        executor: Executor,
        nominate: Callable[[Plan], Awaitable[None]],
        clock: Clock,
        reserver: Reserver | None = None,
    ) -> None:
        """Without ``reserver`` the moved pods' new homes are not reserved."""
        self._settings = settings
        self._evictions = evictions
        self._executor = executor
        self._nominate = nominate
        self._clock = clock
        self._reserver = reserver
        self._told: dict[str, str] = {}
        """Pending pod → the refusal last told for it."""

    async def cycle(self, cluster: LiveCluster) -> Round | None:
        """One cycle over the live cluster now, planned off the event loop; None when
        nothing was planned (``defrag.enabled`` false, no nodes yet, the child failed)."""
        if not self._settings.enabled or cluster.state is None:
            return None
        clock = self._clock
        cooling = self._executor.cooling(clock.monotonic(), clock.wall())  # an earlier leader's too
        job = functools.partial(_plan, cluster, cooling, self._settings, self._evictions)
        budget_s = self._evictions.cycle_budget_s + CHILD_GRACE_S
        try:
            planned = await run_forked(job, budget_s, nice=PLANNER_NICE)
        except ChildFailed as e:
            log.error("migration planning failed, no migration this cycle: %s", e)
            return None
        return await self.act(planned, cluster)

    async def act(self, planned: Round, live: LiveCluster | None = None) -> Round:
        """Hand each migration still valid on ``live`` to the executor (its moved pods'
        new homes reserved first), nominating its pending pod once it is carried out;
        tell each new refusal."""
        for entry in planned.answers:
            answer = entry.answer
            if isinstance(answer, Refusal):
                await self._refused(entry.pod, answer)
                continue
            self._told.pop(entry.pod, None)
            stale = None if live is None else outdated(live, answer.plan)
            if stale is not None:
                log.info("migration for %s: plan dropped: %s", entry.pod, stale)
                continue
            if self._reserver is not None and not self._executor.dry_run:
                await self._reserver.reserve(answer.moves, answer.pod)  # before: see the module
            decision = await self._executor.consider(answer.plan)
            if decision == "evicted":
                await self._nominate(answer.plan)
        return planned

    async def _refused(self, pod: str, refusal: Refusal) -> None:
        if self._told.get(pod) != refusal.reason:
            self._told[pod] = refusal.reason
            await self._executor.refused(TRIGGER, pod, refusal)
