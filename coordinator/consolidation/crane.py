"""crane-scheduler's load annotations, from each node's measured use: what its ``Dynamic``
plugin filters and scores on, written by the publisher beside Stowage's own keys
(``publisher.crane_annotations``, off by default).

crane-scheduler (gocrane/crane-scheduler) has its node annotator pull Prometheus
recording rules and write each as a Node annotation ``<value>,<timestamp>``:

    cpu_usage_avg_5m:      0.35000,2026-11-29T17:14:05Z
    cpu_usage_max_avg_1h:  0.52000,2026-11-29T17:14:05Z
    node_hot_value:        1,2026-11-29T17:14:05Z

* the value is the query's sample formatted as Go's ``strconv.FormatFloat(v, 'f', 5, 64)``
  (five decimals), a ratio 0-1: the plugin compares it with ``maxLimitPecent`` (0.65,
  0.75 in its shipped policy) and scores ``(1 − usage) × weight``;
* the time is Go's layout ``2006-01-02T15:04:05Z`` — the ``Z`` a literal, read back in
  the scheduler's local time zone (``time.ParseInLocation(…, time.Local)``). It is written
  here in UTC: a crane-scheduler whose zone is not UTC reads every value as hours off and
  drops it as expired (or, ahead of its clock, as invalid). An annotation older than its
  sync period plus five minutes is ignored by the plugin, so ``publisher.heartbeat_s``
  must stay under eight minutes (the 5-minute values sync every 3 min) — its default,
  300 s, does.

What each key means here, sampled every :data:`SAMPLE_S` from the node's latest fresh
report (a node with none gathers nothing, and its usage keys are removed):

* ``cpu_usage_avg_5m`` — the mean CPU use over the last 5 minutes (``/proc/stat``, as
  node_exporter's ``node_cpu_seconds_total`` that crane's ``cpu_usage_active`` reads);
* ``cpu_usage_max_avg_1h`` / ``_1d`` — the highest 5-minute mean in the last hour / day
  (``max_over_time(cpu_usage_avg_5m[1h])``); 5-minute spans are aligned to the clock,
  where Prometheus' are rolling;
* ``mem_*`` the same of ``1 − MemAvailable / MemTotal``;
* ``node_hot_value`` — crane's count of recent bindings, with its shipped policy
  (:data:`HOT_VALUE`): ``⌊bindings in 5 min / 5⌋ + ⌊bindings in 1 min / 2⌋``. A binding is a
  pod the pod watch first sees bound to the node; a coordinator that just started counts
  from its first sample, so the value is low for its first five minutes.

The windows are those of the utilisation patrol (:mod:`.windows`); the day's is fed each
5-minute mean as its span closes, so the node keeps 46 + 24 buckets per resource, never a
list of samples. Every replica samples (warm for a takeover); only the leader's publisher
writes, damped like every published number (a value is re-written when it moves by more
than ``publisher.change_pct`` points, or at the heartbeat).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Final

from common.clock import Clock
from coordinator.consolidation.windows import BY_NAME, NodeWindows
from coordinator.kube.publisher import Extra
from coordinator.live import LiveCluster

CPU_AVG_5M: Final = "cpu_usage_avg_5m"
CPU_MAX_AVG_1H: Final = "cpu_usage_max_avg_1h"
CPU_MAX_AVG_1D: Final = "cpu_usage_max_avg_1d"
MEM_AVG_5M: Final = "mem_usage_avg_5m"
MEM_MAX_AVG_1H: Final = "mem_usage_max_avg_1h"
MEM_MAX_AVG_1D: Final = "mem_usage_max_avg_1d"
HOT_VALUE_KEY: Final = "node_hot_value"
KEYS: Final = (
    CPU_AVG_5M,
    CPU_MAX_AVG_1H,
    CPU_MAX_AVG_1D,
    MEM_AVG_5M,
    MEM_MAX_AVG_1H,
    MEM_MAX_AVG_1D,
    HOT_VALUE_KEY,
)
TIME_LAYOUT: Final = "%Y-%m-%dT%H:%M:%SZ"
"""crane-scheduler's ``TimeFormat`` (``2006-01-02T15:04:05Z``), in strftime's words."""
HOT_VALUE: Final = ((300.0, 5), (60.0, 2))
"""crane-scheduler's shipped ``hotValue`` policy: (time range in seconds, bindings per
point)."""
SAMPLE_S: Final = BY_NAME["5m"].bucket_s
"""One sample per node per bucket of the shortest window, as the patrol samples."""
_FIVE_MIN: Final = BY_NAME["1h"]
"""The hour's window: twelve 5-minute buckets, whose means are the 5-minute averages."""
_RECENT: Final = (BY_NAME["5m"], _FIVE_MIN)
_DAY: Final = (BY_NAME["1d"],)


def value(ratio_or_count: float | int, at: float) -> str:
    """One annotation value as crane-scheduler writes it: ``0.35000,2026-…Z``; an int
    (the hot value) as Go's ``strconv.Itoa``."""
    return f"{_text(ratio_or_count)},{_timestamp(at)}"


def _text(ratio_or_count: float | int) -> str:
    return str(ratio_or_count) if isinstance(ratio_or_count, int) else f"{ratio_or_count:.5f}"


def _timestamp(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime(TIME_LAYOUT)


@dataclass(slots=True)
class _Usage:
    """One resource of one node: its 5-minute and hourly buckets, and the day's of the
    5-minute means that closed."""

    recent: NodeWindows = field(default_factory=lambda: NodeWindows(_RECENT))
    day: NodeWindows = field(default_factory=lambda: NodeWindows(_DAY))
    last_at: float = -math.inf

    def observe(self, at: float, pct: float) -> None:
        span = _FIVE_MIN.bucket_s
        if self.last_at > -math.inf and math.floor(at / span) != math.floor(self.last_at / span):
            # The span of the previous sample closed: its mean joins the day.
            self.day.observe(self.last_at, self.recent.heat(_FIVE_MIN, self.last_at)[-1])
        self.recent.observe(at, pct)
        self.last_at = at

    def pct(self, now: float) -> tuple[float, float, float]:
        """Mean of the last 5 minutes, and the highest 5-minute mean of the last hour and
        of the last day (NaN without samples), 0-100."""
        avg = self.recent.summary(BY_NAME["5m"], now).mean_pct
        means = [m for m in self.recent.heat(_FIVE_MIN, now) if not math.isnan(m)]
        hour = max(means) if means else math.nan
        day = self.day.summary(_DAY[0], now).peak_pct
        return avg, hour, hour if math.isnan(day) else max(hour, day)


@dataclass(slots=True)
class _Node:
    cpu: _Usage = field(default_factory=_Usage)
    mem: _Usage = field(default_factory=_Usage)
    bound: frozenset[str] | None = None
    """Uids bound to the node at the last sample (None before the first)."""
    bindings: deque[tuple[float, int]] = field(default_factory=deque)
    """(sample time, pods newly bound since the sample before), within the longest range."""
    hot: int = 0
    """The hot value as of the last sample."""
    pcts: tuple[float, ...] = ()
    """The six usage figures of :data:`KEYS` (0-100, NaN unknown) as of the last sample
    with a fresh report: the publisher asks every node every second, the windows change
    only at a sample."""


class CraneLoad:
    """Every node's crane windows and recent bindings, and the annotations they make."""

    def __init__(self, cluster: LiveCluster, clock: Clock) -> None:
        self._cluster = cluster
        self._clock = clock
        self._nodes: dict[str, _Node] = {}

    def sample(self) -> int:
        """One sample of every node with a fresh report, and the bindings since the last;
        forget nodes gone from the cluster. Returns how many nodes were sampled."""
        cluster, now = self._cluster, self._clock.monotonic()
        for gone in [n for n in self._nodes if n not in cluster.specs]:
            del self._nodes[gone]
        bound: dict[str, set[str]] = {}
        for uid, held in cluster.held.items():
            if held.assumed_until is None:
                bound.setdefault(held.node, set()).add(uid)
        longest = max(r for r, _ in HOT_VALUE)
        sampled = 0
        for name in cluster.specs:
            node = self._nodes.get(name)
            if node is None:
                node = self._nodes[name] = _Node()
            uids = frozenset(bound.get(name, ()))
            if node.bound is not None:
                node.bindings.append((now, len(uids - node.bound)))
            node.bound = uids
            while node.bindings and node.bindings[0][0] <= now - longest:
                node.bindings.popleft()
            node.hot = sum(
                sum(n for t, n in node.bindings if t > now - range_s) // per_point
                for range_s, per_point in HOT_VALUE
            )
            signals = cluster.signals.get(name)
            if signals is None:
                continue
            if not math.isnan(signals.cpu_used_pct):
                node.cpu.observe(now, signals.cpu_used_pct)
            if not math.isnan(signals.mem_used_pct):
                node.mem.observe(now, signals.mem_used_pct)
            node.pcts = (*node.cpu.pct(now), *node.mem.pct(now))
            sampled += 1
        return sampled

    def hot_value(self, name: str) -> int:
        """crane's ``node_hot_value`` of node ``name`` as of the last sample."""
        node = self._nodes.get(name)
        return 0 if node is None else node.hot

    def annotations(self, name: str, at: float) -> Extra:
        """Node ``name``'s crane annotations stamped ``at`` (Unix time): every key, None
        for those without a value (the usage keys of a node without a fresh report; the
        hot value comes from the pod watch and is written for every sampled node)."""
        values: dict[str, str | None] = dict.fromkeys(KEYS)
        numbers: dict[str, float] = {}
        node = self._nodes.get(name)
        if node is None:
            return values, numbers
        stamp = _timestamp(at)  # once, not once a key: every node, every second
        values[HOT_VALUE_KEY] = f"{_text(node.hot)},{stamp}"
        # Any change of the hot value is due: 100 points per point, past any tolerance.
        numbers[f"crane.{HOT_VALUE_KEY}"] = 100.0 * node.hot
        if name not in self._cluster.signals:
            return values, numbers
        for key, pct in zip(KEYS, node.pcts, strict=False):
            if not math.isnan(pct):
                values[key] = f"{_text(pct / 100.0)},{stamp}"
                numbers[f"crane.{key}"] = pct
        return values, numbers


async def run(load: CraneLoad) -> None:
    """Sample every :data:`SAMPLE_S`, on every replica (the leader's publisher writes)."""
    while True:
        load.sample()
        await asyncio.sleep(SAMPLE_S)
