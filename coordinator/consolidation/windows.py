"""Rolling per-node usage windows, kept compact: fixed-size bucketed aggregates.

Each window is a ring of ``buckets`` buckets of ``bucket_s`` seconds; a bucket holds the
sum, count and peak of the samples that fell in it and the index of the span it covers, so
a bucket left over from an earlier lap of the ring is recognised as empty without a sweep.
A node costs the same few kilobytes however long it is watched (:data:`WINDOWS`: 46
buckets of four numbers), never a list of raw samples.

Time is the coordinator's monotonic clock, passed in: an agent's clock plays no part.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import numpy as np

_EPOCH, _SUM, _COUNT, _PEAK = range(4)


@dataclass(frozen=True, slots=True)
class Window:
    """One rolling window: ``buckets`` spans of ``bucket_s`` seconds."""

    name: str
    bucket_s: float
    buckets: int

    @property
    def span_s(self) -> float:
        return self.bucket_s * self.buckets


WINDOWS: Final = (
    Window("5m", 30.0, 10),
    Window("1h", 300.0, 12),
    Window("1d", 3600.0, 24),
)
"""The patrol's windows, shortest first."""
BY_NAME: Final = {w.name: w for w in WINDOWS}


@dataclass(frozen=True, slots=True)
class Summary:
    """A node's utilisation over one window: the mean and peak of its samples (NaN when it
    has none) and the share of the window's buckets that hold any (0-1)."""

    window: Window
    mean_pct: float
    peak_pct: float
    coverage: float


class NodeWindows:
    """One node's buckets, one array per window (rows: buckets; columns: span index, sum,
    count, peak)."""

    __slots__ = ("_rings",)

    def __init__(self, windows: Iterable[Window] = WINDOWS) -> None:
        self._rings = {w: _empty(w) for w in windows}

    def observe(self, at: float, pct: float) -> None:
        """Count one sample of ``pct`` (0-100) taken at ``at`` (monotonic seconds)."""
        for window, ring in self._rings.items():
            span = math.floor(at / window.bucket_s)
            row = ring[span % window.buckets]
            if row[_EPOCH] != span:
                row[:] = (span, 0.0, 0.0, -math.inf)
            row[_SUM] += pct
            row[_COUNT] += 1
            row[_PEAK] = max(row[_PEAK], pct)

    def summary(self, window: Window, now: float) -> Summary:
        """The node's utilisation over the ``window`` ending at ``now`` (its current bucket
        included)."""
        ring = self._rings[window]
        newest = math.floor(now / window.bucket_s)
        live = (ring[:, _EPOCH] > newest - window.buckets) & (ring[:, _EPOCH] <= newest)
        live &= ring[:, _COUNT] > 0
        filled = int(live.sum())
        if not filled:
            return Summary(window, math.nan, math.nan, 0.0)
        count = float(ring[live, _COUNT].sum())
        mean = float(ring[live, _SUM].sum()) / count
        return Summary(window, mean, float(ring[live, _PEAK].max()), filled / window.buckets)

    def heat(self, window: Window, now: float) -> list[float]:
        """The mean of each bucket of ``window``, oldest first ending at ``now`` (NaN where
        a bucket has no sample): one row of the heatmap."""
        ring = self._rings[window]
        newest = math.floor(now / window.bucket_s)
        row = []
        for span in range(newest - window.buckets + 1, newest + 1):
            bucket = ring[span % window.buckets]
            has = bucket[_EPOCH] == span and bucket[_COUNT] > 0
            row.append(float(bucket[_SUM] / bucket[_COUNT]) if has else math.nan)
        return row


def _empty(window: Window) -> np.ndarray:
    ring = np.zeros((window.buckets, 4))
    ring[:, _EPOCH] = -1.0  # no span is -1 on a monotonic clock that started at 0 or later
    return ring
