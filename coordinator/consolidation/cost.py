"""Cost per queue: the CPU-hours and GPU-hours each queue's pods held (allocated) and
used, over the patrol's windows (5 min, 1 h, 1 day) — the chargeback question.

A pod's queue is the ``spec.queue`` of its Volcano PodGroup
(:mod:`coordinator.state.podgroups`), else its namespace (a pod in no PodGroup, or in one
whose queue is not known yet). Each sample of the patrol stands for the
:data:`SAMPLE_S` before it:

* **allocated**: what the pod requests — CPU cores, and GPUs as whole devices times the
  share of each it asks for (two GPUs at 500 milli are 1.0) — times the sample's length;
* **used**: what its node's agent measured — CPU in use (its share of the node's
  allocatable CPU) and the GPUs' utilisation summed — split among the node's pods in
  proportion to what each requests. A node without a fresh report adds its pods'
  allocation and no use: silence is not use.

Kept like the patrol's node windows: a ring of buckets per window and queue (four sums
a bucket), rebuilt on every replica from the same watches and reports, never persisted.
A queue with no pod over the longest window is forgotten, so the queues kept are those of
the last day's pods.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Final

import numpy as np

from coordinator.consolidation.windows import WINDOWS, Window
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.state.podfacts import PodFacts

_EPOCH, _CPU_ALLOC, _CPU_USED, _GPU_ALLOC, _GPU_USED = range(5)
SAMPLE_S: Final = WINDOWS[0].bucket_s
"""What one sample stands for: the patrol samples once per bucket of its shortest window."""


@dataclass(frozen=True, slots=True)
class QueueCost:
    """One queue's hours over one window."""

    queue: str
    cpu_allocated_h: float
    cpu_used_h: float
    gpu_allocated_h: float
    gpu_used_h: float


class QueueCosts:
    """Every queue's rings, and their sums over a window."""

    def __init__(self) -> None:
        self._rings: dict[str, dict[Window, np.ndarray]] = {}

    def sample(self, cluster: LiveCluster, now: float, span_s: float = SAMPLE_S) -> None:
        """Count ``span_s`` seconds of every bound pod at ``now`` (monotonic seconds)."""
        queues, hours = cluster.podgroups.queues(), span_s / 3600.0
        bound = [(p.node, p) for p in cluster.facts.values() if p.node is not None]
        node_cpu: dict[str, int] = defaultdict(int)
        node_gpu: dict[str, float] = defaultdict(float)
        for node, pod in bound:
            node_cpu[node] += pod.request.cpu_m
            node_gpu[node] += _gpus(pod)
        # What each requested unit on a node used: cores per milli-CPU, GPUs per GPU held
        # (0 where unmeasured: a silent node's pods are allocated, never used).
        cpu_rate = {n: _rate(_cores_used(cluster, n), m) for n, m in node_cpu.items()}
        gpu_rate = {n: _rate(_gpus_busy(cluster, n), g) for n, g in node_gpu.items()}
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
        for node, pod in bound:
            cpu_m, gpus = pod.request.cpu_m, _gpus(pod)
            row = sums[queues.of(pod) or pod.namespace]
            row[0] += cpu_m / 1000
            row[1] += cpu_rate[node] * cpu_m
            row[2] += gpus
            row[3] += gpu_rate[node] * gpus
        totals = {q: np.array(row) * hours for q, row in sums.items()}
        for queue, total in totals.items():
            rings = self._rings.get(queue)
            if rings is None:
                rings = self._rings[queue] = {w: _empty(w) for w in WINDOWS}
            for window, ring in rings.items():
                span = math.floor(now / window.bucket_s)
                bucket = ring[span % window.buckets]
                if bucket[_EPOCH] != span:
                    bucket[:] = (span, 0.0, 0.0, 0.0, 0.0)
                bucket[1:] += total
        longest = WINDOWS[-1]
        for queue in [
            q for q, r in self._rings.items() if not _live(r[longest], longest, now).any()
        ]:
            del self._rings[queue]

    def over(self, window: Window, now: float) -> list[QueueCost]:
        """Each queue's hours over the ``window`` ending at ``now``, sorted by queue."""
        found = []
        for queue in sorted(self._rings):
            ring = self._rings[queue][window]
            sums = ring[_live(ring, window, now)].sum(axis=0)
            found.append(
                QueueCost(
                    queue,
                    cpu_allocated_h=float(sums[_CPU_ALLOC]),
                    cpu_used_h=float(sums[_CPU_USED]),
                    gpu_allocated_h=float(sums[_GPU_ALLOC]),
                    gpu_used_h=float(sums[_GPU_USED]),
                )
            )
        return found


def _gpus(pod: PodFacts) -> float:
    """The GPUs a pod holds: whole devices times the share of each it asks for."""
    return pod.request.gpus * pod.request.gpu_milli / 1000


def _cores_used(cluster: LiveCluster, name: str) -> float:
    """The CPU cores node ``name``'s agent measured in use (of its allocatable); NaN
    without a fresh report."""
    signals, state = cluster.signals.get(name), cluster.state
    if signals is None or state is None or name not in state.index:
        return math.nan
    return signals.cpu_used_pct / 100 * int(state.cpu_cap[state.index[name]]) / 1000


def _gpus_busy(cluster: LiveCluster, name: str) -> float:
    """The GPUs node ``name``'s agent measured busy (utilisation summed); NaN unknown."""
    signals = cluster.signals.get(name)
    return math.nan if signals is None else signals.gpu_busy


def _rate(used: float, held: float) -> float:
    return 0.0 if math.isnan(used) or not held else used / held


def _live(ring: np.ndarray, window: Window, now: float) -> np.ndarray:
    newest = math.floor(now / window.bucket_s)
    return (ring[:, _EPOCH] > newest - window.buckets) & (ring[:, _EPOCH] <= newest)


def _empty(window: Window) -> np.ndarray:
    ring = np.zeros((window.buckets, 5))
    ring[:, _EPOCH] = -1.0  # no span is -1 on a monotonic clock that started at 0 or later
    return ring


def publish(costs: QueueCosts, now: float, metrics: CoordinatorMetrics) -> None:
    """Set ``stowage_queue_{cpu,gpu}_hours{queue,window,kind}`` from ``costs`` at ``now``:
    the gauges are cleared first, so a queue forgotten leaves no series behind (no await
    between: a scrape on the event loop sees all or none)."""
    metrics.queue_cpu_hours.clear()
    metrics.queue_gpu_hours.clear()
    for window in WINDOWS:
        for c in costs.over(window, now):
            metrics.queue_cpu_hours.labels(c.queue, window.name, "allocated").set(c.cpu_allocated_h)
            metrics.queue_cpu_hours.labels(c.queue, window.name, "used").set(c.cpu_used_h)
            metrics.queue_gpu_hours.labels(c.queue, window.name, "allocated").set(c.gpu_allocated_h)
            metrics.queue_gpu_hours.labels(c.queue, window.name, "used").set(c.gpu_used_h)
