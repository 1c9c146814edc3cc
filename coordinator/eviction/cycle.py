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

**Bounded planning.** Each plan's search stops at ``plan_deadline_s`` (the plan says it
was cut) and the cycle's planning at ``cycle_budget_s``; the pending pods it did not reach
are planned first in the next cycle. Both on the injected monotonic clock.
"""

from __future__ import annotations

from coordinator.config import EvictionSettings
from coordinator.eviction.executor import Executor
from coordinator.eviction.plan import Deadline, Refusal, plan_preemption, plan_pressure
from coordinator.eviction.view import view_of
from coordinator.live import LiveCluster
from coordinator.state.podfacts import PodFacts


class PressureWatch:
    """Since when each node's memory pressure has held, on the receipt clock."""

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
        self.pressure = PressureWatch(self._settings)
        self._refusals: dict[str, str] = {}
        """Subject → the planner's last refusal: logged when it changes, not each cycle."""
        self._deferred: list[str] = []
        """Pending pods (``ns/name``) the last cycle's planning budget left unplanned:
        planned first this time, so no pod waits behind the same others every cycle."""

    async def run(self) -> None:
        """One cycle."""
        cluster, executor = self._cluster, self._executor
        await executor.start_cycle()
        now, now_mono = cluster.clock.wall(), cluster.clock.monotonic()
        cooling = executor.cooldowns.until(now_mono, now)
        view = view_of(cluster, cooling)
        if view is None:
            return
        clock = cluster.clock.monotonic
        budget_until = clock() + self._settings.cycle_budget_s
        first = {key: k for k, key in enumerate(self._deferred)}
        pending = sorted(_pending(cluster), key=lambda p: (first.get(p.key, len(first)), p.key))
        self._deferred = []
        for k, pod in enumerate(pending):
            if clock() >= budget_until:
                self._deferred = [p.key for p in pending[k:]]
                break
            deadline = Deadline(clock, min(clock() + self._settings.plan_deadline_s, budget_until))
            outcome = plan_preemption(view, pod, self._settings, now, deadline)
            if isinstance(outcome, Refusal):
                await self._refused("preemption", pod.key, outcome)
            else:
                self._refusals.pop(pod.key, None)
                await executor.consider(outcome)
        for node in self.pressure.due(cluster):
            outcome = plan_pressure(view, node, self._settings, now)
            if isinstance(outcome, Refusal):
                await self._refused("pressure", node, outcome)
            else:
                self._refusals.pop(node, None)
                await executor.consider(outcome)

    async def _refused(self, trigger: str, subject: str, refusal: Refusal) -> None:
        if self._refusals.get(subject) != refusal.reason:
            self._refusals[subject] = refusal.reason
            await self._executor.refused(trigger, subject, refusal)


def _pending(cluster: LiveCluster) -> list[PodFacts]:
    """Pods on no node that the extender has not just placed either (an assumed pod is
    about to be bound)."""
    held = cluster.held
    return [f for f in cluster.facts.values() if f.node is None and f.uid not in held]
