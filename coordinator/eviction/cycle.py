"""The leader's eviction cycle: plans for pending pods that fit nowhere and for nodes whose
memory pressure persisted, handed to the executor. Runs on the leader only (the caller
waits for the lease); every API call the executor makes is fenced besides.

**Pressure trigger.** A node gets a pressure plan once memory PSI ``full`` avg10 has been
at or above ``pressure_full_avg10_pct`` in every report received for
``pressure_for_s`` — by the coordinator's receipt clock, from the first such report to a
later one received at least ``pressure_for_s`` after it: the pressure must be seen to
hold, so one report, however long it stays fresh, never evicts.
A report below the threshold, a report without PSI, or no fresh report (stale by
:mod:`coordinator.live.freshness`, even before the expiry loop has noticed) starts the count
afresh: stale or missing reports never lead to an eviction. The window is longer than
the colocation controller's tightening, so pressure that lasts is pressure the
best-effort throttle did not relieve. Reports are sampled once a cycle (one report
interval): avg10 already smooths over ten seconds.

**Off the event loop.** The planning itself runs in a forked child over the child's copy
of the cluster (:mod:`coordinator.eviction.round`); the loop only forks, waits in a
worker thread, and acts on the answer. A plan that no longer holds when the answer comes
(its preemptor bound, a victim gone) is dropped and made again next cycle.

**Nominations.** Once a preemption is carried out (every victim evicted, not in dry run),
its preemptor is nominated to the node for ``nomination_ttl_s``
(:mod:`coordinator.live.nominations`): every replica's filter holds that room for it.
Each cycle drops the nominations of pods that were bound or are gone, and ends those that
expired with an Event on the pod. The reservations in the same annotation (a moved pod's
new home, held for its replacement) are left to their own tidying
(:mod:`coordinator.consolidation.reserver`).
"""

from __future__ import annotations

import functools
import logging
from typing import Final

from coordinator.config import EvictionSettings
from coordinator.eviction.answers import Plan, Refusal
from coordinator.eviction.executor import Executor
from coordinator.eviction.round import outdated, plan_round
from coordinator.forked import ChildFailed, run_forked
from coordinator.live import LiveCluster, nominations

log = logging.getLogger(__name__)

CHILD_GRACE_S: Final = 30.0
"""How much longer than ``cycle_budget_s`` a planning child may take before it is killed
(a child that hangs): the budget is checked between plans and within them on the
coordinator's clock, so only a starved CPU stretches a round this far."""
PLANNER_NICE: Final = 10
"""The planning child's niceness: background work, which yields the CPU to the loop that
answers the schedulers."""


class SustainedPressure:
    """Since when each node's memory pressure has held, on the receipt clock (the agent's
    :class:`agent.pressurewatch.PressureWatch` is another thing: a kernel PSI trigger)."""

    def __init__(self, settings: EvictionSettings) -> None:
        self._settings = settings
        self._since: dict[str, float] = {}

    def due(self, cluster: LiveCluster) -> list[str]:
        """The nodes whose pressure has held for ``pressure_for_s`` now."""
        now = cluster.clock.monotonic()
        threshold = self._settings.pressure_full_avg10_pct
        for node in list(self._since):
            if node not in cluster.signals:
                del self._since[node]
        dwell = self._settings.pressure_for_s
        due = []
        for node, signals in cluster.signals.items():
            pressed = signals.memory_full_pct >= threshold  # NaN (no PSI) never is
            report = cluster.freshness.verdict(node, now) if pressed else None
            if report is None or not report.fresh or report.received_at is None:
                self._since.pop(node, None)
                continue
            since = self._since.setdefault(node, report.received_at)
            if report.received_at - since >= dwell:
                due.append(node)
        return sorted(due)


class Cycle:
    def __init__(self, cluster: LiveCluster, executor: Executor) -> None:
        self._cluster = cluster
        self._executor = executor
        self._settings = cluster.settings.evictions
        self.pressure = SustainedPressure(self._settings)
        self._refusals: dict[str, str] = {}
        """Subject → the planner's last refusal: logged when it changes, not each cycle."""
        self._deferred: tuple[str, ...] = ()
        """Pending pods (``ns/name``) the last cycle's planning budget left unplanned:
        planned first this time, so no pod waits behind the same others every cycle."""

    async def run(self) -> None:
        """One cycle: nominations tidied, a round planned off the event loop
        (:mod:`coordinator.eviction.round`), each plan still valid handed to the executor,
        and each preemption it carried out nominated."""
        cluster, executor = self._cluster, self._executor
        await executor.start_cycle()
        await self._tidy_nominations()
        if cluster.state is None:
            return
        now, now_mono = cluster.clock.wall(), cluster.clock.monotonic()
        cooling = executor.cooling(now_mono, now)  # an earlier leader's too
        job = functools.partial(
            plan_round, cluster, cooling, self._deferred, self.pressure.due(cluster), now
        )
        try:
            planned = await run_forked(
                job, self._settings.cycle_budget_s + CHILD_GRACE_S, nice=PLANNER_NICE
            )
        except ChildFailed as e:
            log.error("eviction planning failed, nothing planned this cycle: %s", e)
            return
        self._deferred = planned.deferred
        for outcome in planned.outcomes:
            answer = outcome.answer
            if isinstance(answer, Plan):
                why = outdated(cluster, answer)
                if why is not None:  # replanned next cycle, on what is there then
                    log.info("%s %s: plan dropped: %s", outcome.trigger, outcome.subject, why)
                    continue
            if isinstance(answer, Refusal):
                await self._refused(outcome.trigger, outcome.subject, answer)
                continue
            self._refusals.pop(outcome.subject, None)
            decision = await executor.consider(answer)
            if decision == "evicted" and answer.preemptor_uid is not None:
                await self.nominate(answer)

    async def _refused(self, trigger: str, subject: str, refusal: Refusal) -> None:
        if self._refusals.get(subject) != refusal.reason:
            self._refusals[subject] = refusal.reason
            await self._executor.refused(trigger, subject, refusal)

    async def nominate(self, plan: Plan) -> None:
        """Hold the room ``plan`` freed for its preemptor, for ``nomination_ttl_s``."""
        assert plan.preemptor is not None and plan.preemptor_uid is not None
        cluster = self._cluster
        now = cluster.clock.wall()
        entry = nominations.Nomination(
            plan.preemptor, plan.preemptor_uid, plan.node, now + self._settings.nomination_ttl_s
        )
        kept = tuple(
            e for e in cluster.nominations.on(plan.node) if e.until > now and e.uid != entry.uid
        )
        await self.write(plan.node, (*kept, entry), now)

    async def _tidy_nominations(self) -> None:
        """Drop the nominations whose pod was bound or is gone, and those expired (told
        on the pod): every replica's filter stops holding their room."""
        cluster = self._cluster
        now = cluster.clock.wall()
        for node in cluster.nominations.nodes():
            entries = cluster.nominations.on(node)
            kept = []
            for entry in entries:
                if entry.reservation:  # not this tidy's (see the module)
                    kept.append(entry)
                    continue
                facts = cluster.facts.get(entry.uid)
                if facts is None or facts.node is not None:
                    continue
                if entry.until <= now:
                    await self._executor.nomination_expired(entry, self._settings.nomination_ttl_s)
                    continue
                kept.append(entry)
            if len(kept) < len(entries):
                await self.write(node, tuple(kept), now)

    async def write(
        self, node: str, entries: tuple[nominations.Nomination, ...], now: float
    ) -> bool:
        """Write ``node``'s nominations as ``entries`` (the newest that fit,
        :func:`nominations.value`); whether the API server took it."""
        value = nominations.value(entries, now)
        if not await self._executor.nominate(node, value, f"{len(entries)} nominated"):
            return False
        # As the watch will say: what this leader holds from now on, before the echo.
        self._cluster.nominations.observe(node, {} if value is None else {nominations.KEY: value})
        return True
