"""One simulation run: every arrival scheduled once (add-only, no retries), metrics after
every event, then binned by arrived workload as the FGD paper reports them.

Per event: arrived GPU request (failed pods included), allocated GPU, idle GPU, allocated
CPU and the cluster's fragmentation Σ F_n(M) with M the workload's typical shapes — kept
up to date incrementally, only the node a placement changed is measured again. Binning:
x = arrived as an integer percentage of cluster GPUs (round half to even); a metric at x
is the mean over the events at x, or at x ± 1 when none fall there (:func:`events_at`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.scoring.base import Policy
from coordinator.scoring.engine import Engine
from coordinator.scoring.fragmentation import Fragmentation
from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from coordinator.state.podrequest import PodRequest
from hack.sim.arrivals import Arrivals

X_MAX: Final = 130
PROGRESS_EVERY: Final = 256
"""Pods between two progress reports of a run (and the remainder at its end)."""
FAIL_CLASSES: Final = ("cpu", "share", "1gpu", "multi")


def fail_class(pod: PodRequest) -> str:
    if not pod.gpus:
        return "cpu"
    if pod.sharing:
        return "share"
    return "1gpu" if pod.gpus == 1 else "multi"


class ClusterFragmentation:
    """Σ F_n(M) over a cluster's nodes, kept up to date as placements change them: only
    the node a placement changed is measured again (:meth:`changed`)."""

    def __init__(self, state: ClusterState, measure: Fragmentation) -> None:
        self.state = state
        self.measure = measure
        self._models = [state.models[m] for m in state.model_id]
        self._node = np.array([self._measured(i) for i in range(len(state))])
        self.total = float(self._node.sum())
        """Milli-GPU the typical pods could not use, over every node."""

    def changed(self, i: int) -> None:
        """Node ``i``'s free resources changed: measure it again."""
        new = self._measured(i)
        self.total += new - self._node[i]
        self._node[i] = new

    def _measured(self, i: int) -> float:
        s = self.state
        return self.measure.node(int(s.cpu_free[i]), s.gpu_tuple(i), self._models[i])


@dataclass
class Events:
    """Per-event metrics of one run, in arrival order."""

    arrived: npt.NDArray[np.int64]
    used: npt.NDArray[np.int64]
    idle: npt.NDArray[np.int64]
    frag: npt.NDArray[np.float64]
    failed: list[str | None]
    cpu_used: npt.NDArray[np.int64]
    """CPU millicores allocated after each event."""
    cpu_total: int
    """The cluster's CPU millicores."""
    placements: list[Placement | None] = field(default_factory=list)
    seconds: float = 0.0
    """CPU seconds the scheduling loop took (this process only: one core)."""


def run(
    nodes: Sequence[NodeSpec],
    arrivals: Arrivals,
    policy: Policy,
    measure: Fragmentation,
    keep_placements: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Events:
    """Replay ``arrivals``; ``progress`` is told how many more pods were decided, every
    :data:`PROGRESS_EVERY` pods and at the end (the counts add up to the pods replayed)."""
    state = ClusterState(nodes)
    engine = Engine(state, policy, arrivals.rank)
    fragmentation = ClusterFragmentation(state, measure)
    total_gpu = state.gpu_total_milli
    n = len(arrivals.pods)
    arrived = np.zeros(n, dtype=np.int64)
    used = np.zeros(n, dtype=np.int64)
    frag = np.zeros(n)
    cpu_used = np.zeros(n, dtype=np.int64)
    failed: list[str | None] = []
    placements: list[Placement | None] = []
    arrived_sum = used_sum = cpu_sum = 0
    started = time.process_time()
    for k, pod in enumerate(arrivals.pods):
        arrived_sum += pod.gpu_total_milli
        placement = engine.place(pod)
        if placement is None:
            failed.append(fail_class(pod))
        else:
            failed.append(None)
            used_sum += pod.gpu_total_milli
            cpu_sum += pod.cpu_m
            fragmentation.changed(placement.node)
        if keep_placements:
            placements.append(placement)
        arrived[k], used[k], cpu_used[k] = arrived_sum, used_sum, cpu_sum
        frag[k] = fragmentation.total
        if progress is not None and (k + 1) % PROGRESS_EVERY == 0:
            progress(PROGRESS_EVERY)
    seconds = time.process_time() - started
    if progress is not None and n % PROGRESS_EVERY:
        progress(n % PROGRESS_EVERY)
    state.check()
    cpu_total = int(state.cpu_cap.sum())
    idle = total_gpu - used
    return Events(arrived, used, idle, frag, failed, cpu_used, cpu_total, placements, seconds)


def x_of(arrived: npt.NDArray[np.int64], total_gpu_milli: int) -> npt.NDArray[np.int64]:
    """Each event's x: arrived GPU request as an integer % of the cluster (half to even)."""
    return np.rint(arrived / (total_gpu_milli / 100)).astype(np.int64)


def events_at(x: npt.NDArray[np.int64], point: int) -> npt.NDArray[np.int64]:
    """The events a metric at ``point`` averages: those at x = point, or at x = point ± 1
    when none fall there."""
    at = np.flatnonzero(x == point)
    if not len(at):
        at = np.flatnonzero(np.abs(x - point) <= 1)
    return at


def binned(events: Events, total_gpu_milli: int) -> list[dict[str, float]]:
    """One row per x in 0..130: allocation, unallocated, fragmentation amount and ratio (%),
    CPU allocated (%), the number of events averaged and the failures so far by class."""
    x = x_of(events.arrived, total_gpu_milli)
    alloc = 100 * events.used / total_gpu_milli
    cpu_alloc = 100 * events.cpu_used / max(events.cpu_total, 1)
    frag_amount = 100 * events.frag / total_gpu_milli
    with np.errstate(divide="ignore", invalid="ignore"):
        frag_ratio = np.where(events.idle > 0, 100 * events.frag / events.idle, 0.0)
    failed_so_far = {c: np.cumsum([f == c for f in events.failed]) for c in FAIL_CLASSES}
    rows = []
    for point in range(X_MAX + 1):
        at = events_at(x, point)
        if not len(at):
            continue
        last = at[-1]
        rows.append(
            {
                "x": point,
                "alloc_pct": float(alloc[at].mean()),
                "unalloc_pct": float(100 - alloc[at].mean()),
                "frag_amount_pct": float(frag_amount[at].mean()),
                "frag_ratio_pct": float(frag_ratio[at].mean()),
                "cpu_alloc_pct": float(cpu_alloc[at].mean()),
                "n_events": int(len(at)),
                **{f"failed_{c}": int(failed_so_far[c][last]) for c in FAIL_CLASSES},
            }
        )
    return rows
