"""The utilisation patrol: each node's utilisation sampled into rolling windows, and the
nodes that stayed under the threshold for a window.

A node's utilisation is the larger of what its pods hold (the dominant share of CPU,
memory and GPUs, the numbers of ``stowage.io/fullness``) and the CPU its agent measured in
use: a node whose pods request little but burn a lot is not idle, nor one whose pods hold
much and idle. Only a node with a fresh report is sampled: silence is not idleness, so a
node whose agent went quiet gathers no samples and loses coverage until it reports again.

**Surviving a leader change: rebuilt, not persisted.** Every replica samples its own
cluster state, which each keeps from the same watches (allocation) and, with the agents'
fan-out, the same reports (measured CPU); the windows of the replica that takes over are
already as full as the old leader's. A replica that has just started has empty windows and
judges no node until a window is ``min_coverage`` full: it marks later, never wrongly.
Writing the windows into a ConfigMap would cost an API write every bucket for a copy that
every replica already has, and one more object in the coordinator's namespace to trust.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from common.clock import Clock
from coordinator.config import PatrolSettings
from coordinator.consolidation.cost import QueueCosts
from coordinator.consolidation.windows import BY_NAME, WINDOWS, NodeWindows, Summary, Window
from coordinator.kube.publisher import fullness_pct
from coordinator.live import LiveCluster

SAMPLE_S: Final = WINDOWS[0].bucket_s
"""One sample per node per bucket of the shortest window."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node under the threshold: the longest window it stayed under, and why, in words."""

    node: str
    summary: Summary
    reason: str


class Patrol:
    """The windows of every known node, and the judgement over them."""

    def __init__(self, cluster: LiveCluster, settings: PatrolSettings, clock: Clock) -> None:
        self._cluster = cluster
        self.settings = settings
        self._clock = clock
        self.windows: dict[str, NodeWindows] = {}
        self.costs = QueueCosts()
        """Each queue's CPU- and GPU-hours, sampled with the nodes."""
        self.judged: list[Candidate] = []
        """The latest :meth:`candidates` (:func:`coordinator.consolidation.marker.run`'s,
        every :data:`SAMPLE_S`): where the drain planner takes its candidates from,
        without judging the windows again on the event loop."""

    def sample(self) -> int:
        """Take one sample of every node with a fresh report (and of every queue's
        hours), forget nodes gone from the cluster; return how many nodes were sampled."""
        cluster, now = self._cluster, self._clock.monotonic()
        for gone in [n for n in self.windows if n not in cluster.specs]:
            del self.windows[gone]
        sampled = 0
        for name in cluster.signals:
            pct = utilisation_pct(cluster, name)
            if pct is None:
                continue
            windows = self.windows.get(name)
            if windows is None:
                windows = self.windows[name] = NodeWindows()
            windows.observe(now, pct)
            sampled += 1
        self.costs.sample(cluster, now)
        return sampled

    def summaries(self, name: str) -> list[Summary]:
        """Node ``name``'s utilisation over every window, shortest first (none if it was
        never sampled)."""
        windows, now = self.windows.get(name), self._clock.monotonic()
        return [] if windows is None else [windows.summary(w, now) for w in WINDOWS]

    def candidates(self) -> list[Candidate]:
        """The nodes whose mean utilisation stayed under the threshold over a window at
        least as long as ``window``, each with the longest such window; sorted by name."""
        settings = self.settings
        shortest = BY_NAME[settings.window]
        judged = [w for w in WINDOWS if w.span_s >= shortest.span_s]
        found = []
        for name in sorted(self.windows):
            if name not in self._cluster.specs:
                continue
            under = [s for s in self.summaries(name) if s.window in judged and self._under(s)]
            if under:
                summary = under[-1]
                found.append(Candidate(name, summary, _reason(summary, settings)))
        return found

    def _under(self, summary: Summary) -> bool:
        settings = self.settings
        return (
            summary.coverage >= settings.min_coverage
            and not math.isnan(summary.mean_pct)
            and summary.mean_pct < settings.threshold_pct
        )

    def unschedulable(self, name: str) -> bool:
        """Whether node ``name`` is cordoned now (``spec.unschedulable``, from the watch)."""
        facts = self._cluster.node_facts.get(name)
        return facts is not None and facts.unschedulable

    def now(self) -> float:
        """The patrol's clock now (monotonic seconds): the end of every window."""
        return self._clock.monotonic()

    def nodes(self) -> list[str]:
        """The nodes of the cluster now that were ever sampled."""
        return [n for n in self.windows if n in self._cluster.specs]

    def heat(self, window: Window, names: Iterable[str]) -> dict[str, list[float]]:
        """One row of bucket means per node (oldest first, NaN where unsampled)."""
        now = self._clock.monotonic()
        return {n: self.windows[n].heat(window, now) for n in names if n in self.windows}


def utilisation_pct(cluster: LiveCluster, name: str) -> float | None:
    """Node ``name``'s utilisation now, 0-100; None without a fresh report or a state."""
    signals, state = cluster.signals.get(name), cluster.state
    if signals is None or state is None or name not in state.index:
        return None
    held = max(fullness_pct(state, state.index[name]).values())
    used = signals.cpu_used_pct
    return held if math.isnan(used) else max(held, used)


def _reason(summary: Summary, settings: PatrolSettings) -> str:
    return (
        f"mean utilisation {summary.mean_pct:.1f}% (peak {summary.peak_pct:.1f}%) over the"
        f" last {summary.window.name}, below {settings.threshold_pct:g}%"
        f" ({summary.coverage:.0%} of the window sampled)"
    )
