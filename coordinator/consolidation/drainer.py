"""The leader acting on drain plans (``drain.enabled``), once per eviction cycle, through
the eviction executor only — so a drain's evictions are dry runs until
``evictions.enabled``, within the cycle's caps and rate, one round per node per
``evictions.cooldown_s``, and loop-prevented like every other round.

Per cycle: the patrol's latest candidates (emptiest first) are planned
(:func:`coordinator.consolidation.drain.plan_drains`) in a forked child over its frozen
copy of the cluster, as the eviction cycle plans (:mod:`coordinator.forked`: placing pods
one by one over tens of thousands costs seconds of Python, which must not stall the
scheduler's answers), within ``evictions.cycle_budget_s``; a drain whose pods have moved
since is left for the next cycle. Then

* a node draining (tainted :data:`~coordinator.consolidation.drain.DISRUPTED`) that the
  plan no longer drains is **abandoned**: the taint comes off
  (``ConsolidationDrainAbandoned``, with the reason) and what is left on it stays;
* a new drain's node is **tainted first** (``ConsolidationDrainStarted``): nothing new
  lands on it while its pods move; only once the taint is written does the executor get
  the round. In dry run (``evictions.enabled`` false) nothing is tainted: a
  ``ConsolidationWouldDrain`` Event tells the plan once, and the executor's dry run
  tells the evictions;
* a node draining whose pods are all gone stays tainted (``ConsolidationDrained``, once):
  it is free for the cluster autoscaler to remove.

Each moved pod's destination is reserved for its replacement right before the executor
gets the round (:mod:`coordinator.consolidation.reserver`; never in dry run), so it lands
where the plan placed it; the reservations end with the drain, abandoned or done.

With ``drain.enabled`` false every node the taint is on gets it taken off: switching
drains off puts the nodes back. Every write passes the lease's fence right before it is
sent; an Event goes through the fenced recorder.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from common.clock import Clock
from coordinator import feasibility
from coordinator.config import DrainSettings, EvictionSettings
from coordinator.consolidation.drain import DISRUPTED, DrainPlan, draining, plan_drains
from coordinator.consolidation.patrol import Patrol
from coordinator.consolidation.reserver import Reserver, for_drain
from coordinator.eviction.answers import Deadline
from coordinator.eviction.cycle import CHILD_GRACE_S, PLANNER_NICE
from coordinator.eviction.executor import Executor, Recorder
from coordinator.eviction.round import outdated
from coordinator.eviction.view import ClusterView, view_of
from coordinator.forked import ChildFailed, run_forked
from coordinator.kube.client import KubeError, translate
from coordinator.kube.events import EventType, ObjectRef
from coordinator.kube.leader import Fence, LeaseLost
from coordinator.live import LiveCluster

log = logging.getLogger(__name__)

STARTED: Final = "ConsolidationDrainStarted"
WOULD_DRAIN: Final = "ConsolidationWouldDrain"
ABANDONED: Final = "ConsolidationDrainAbandoned"
DRAINED: Final = "ConsolidationDrained"


def candidates(patrol: Patrol) -> list[str]:
    """The patrol's latest candidates, lowest mean utilisation first (then by name)."""
    judged = sorted(patrol.judged, key=lambda c: (c.summary.mean_pct, c.node))
    return [c.node for c in judged]


class Drainer:
    def __init__(
        self,
        settings: DrainSettings,
        evictions: EvictionSettings,
        executor: Executor,
        taint: Callable[[str, bool], bool],
        recorder: Recorder,
        fence: Fence,
        clock: Clock,
        reserver: Reserver | None = None,
    ) -> None:
        """Without ``reserver`` the moved pods' new homes are not reserved."""
        self._settings = settings
        self._evictions = evictions
        self._executor = executor
        self._taint = taint
        self._recorder = recorder
        self._fence = fence
        self._clock = clock
        self._reserver = reserver
        self._told: dict[str, str] = {}
        """Node → the Event last told for it (each is told once while it holds)."""

    async def cycle(self, cluster: LiveCluster, patrol: Patrol) -> DrainPlan | None:
        """One cycle over the live cluster now, planned off the event loop; None when
        nothing was planned."""
        if not self._settings.enabled:
            await self._lift(cluster.node_facts)
            return None
        if cluster.state is None:
            return None
        clock = self._clock
        cooling = self._executor.cooling(clock.monotonic(), clock.wall())  # an earlier leader's too
        job = functools.partial(
            _plan, cluster, cooling, candidates(patrol), self._settings, self._evictions
        )
        budget_s = self._evictions.cycle_budget_s + CHILD_GRACE_S
        try:
            plan = await run_forked(job, budget_s, nice=PLANNER_NICE)
        except ChildFailed as e:
            log.error("drain planning failed, no drain this cycle: %s", e)
            return None
        return await self.act(plan, cluster)

    async def run(self, view: ClusterView, names: Sequence[str]) -> DrainPlan | None:
        """Plan the drains of ``names`` over ``view`` here and act on them."""
        if not self._settings.enabled:
            await self._lift(view.nodes)
            return None
        mono = self._clock.monotonic
        deadline = Deadline(mono, mono() + self._evictions.cycle_budget_s)
        plan = plan_drains(
            view, names, self._settings, self._evictions, self._clock.wall(), deadline
        )
        return await self.act(plan)

    async def act(self, plan: DrainPlan, live: LiveCluster | None = None) -> DrainPlan:
        """Act on ``plan`` (see the module); a drain whose pods are no longer where it
        found them on ``live`` waits for the next cycle's plan."""
        for blocked in plan.blocked:
            if blocked.draining:
                await self._abandon(blocked.node, blocked.reason)
        for drain in plan.drains:
            stale = None if live is None or drain.plan is None else outdated(live, drain.plan)
            if stale is not None:
                log.info("drain of %s: plan dropped: %s", drain.node, stale)
                continue
            if drain.plan is None:
                if drain.draining:
                    await self._tell(
                        drain.node, DRAINED, f"drained: no pod left to move off {drain.node}"
                    )
                continue
            if not drain.draining:
                if self._executor.dry_run:
                    await self._tell(
                        drain.node,
                        WOULD_DRAIN,
                        f"would taint {DISRUPTED}:NoSchedule and drain (dry run:"
                        f" evictions.enabled is false): {drain.plan.reason}",
                    )
                elif await self._write(drain.node, True):
                    await self._tell(
                        drain.node, STARTED, f"tainted {DISRUPTED}:NoSchedule: {drain.plan.reason}"
                    )
                else:
                    continue  # not tainted: no pod moves
            if self._reserver is not None and not self._executor.dry_run:
                await self._reserver.reserve(drain.moves, for_drain(drain.node))
            await self._executor.consider(drain.plan)
        return plan

    async def _lift(self, nodes: Mapping[str, feasibility.Node]) -> None:
        for node in draining(nodes):
            await self._abandon(node, "drain.enabled is false")

    async def _abandon(self, node: str, why: str) -> None:
        if await self._write(node, False):
            await self._tell(node, ABANDONED, f"drain abandoned, {DISRUPTED} taint removed: {why}")

    async def _write(self, node: str, present: bool) -> bool:
        """Put the taint on ``node`` or take it off, past the fence; whether the node now
        is as asked (False: not leading, or the API refused; tried again next cycle)."""

        def fenced() -> bool:
            self._fence.check(f"taint node {node}")
            return self._taint(node, present)

        try:
            await asyncio.to_thread(fenced)
        except LeaseLost as e:
            log.warning("%s", e)
            return False
        except Exception as e:
            error = e if isinstance(e, KubeError) else translate(f"taint node {node}", e)
            log.warning("%s; trying again next cycle", error)
            return False
        return True

    async def _tell(self, node: str, reason: str, message: str) -> None:
        if self._told.get(node) == reason:
            return
        self._told[node] = reason
        log.info("%s %s: %s", reason, node, message)
        await asyncio.to_thread(
            self._recorder.record, ObjectRef.node(node), EventType.NORMAL, reason, message
        )


def _plan(
    cluster: LiveCluster,
    cooling: Mapping[str, float],
    names: Sequence[str],
    settings: DrainSettings,
    evictions: EvictionSettings,
) -> DrainPlan:
    """The drain plan over ``cluster`` as it is (in the planning child: its frozen copy)."""
    view = view_of(cluster, cooling)
    if view is None:
        return DrainPlan((), ())
    clock = cluster.clock
    deadline = Deadline(clock.monotonic, clock.monotonic() + evictions.cycle_budget_s)
    return plan_drains(view, names, settings, evictions, clock.wall(), deadline)
