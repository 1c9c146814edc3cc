"""What the demo shows at the end: both schedulers' clusters side by side, and a plot.

Per pod as it arrives, each column records the GPU asked for so far, the GPU allocated
and the cluster's GPU fragmentation as FGD measures it (Σ over nodes of the GPU the
workload's typical pods could not use there), only the node a placement changed measured
again — :class:`hack.sim.replay.ClusterFragmentation`, as the simulator keeps it. The
table then reads each scheduler's cluster at the end; the PNG draws unallocated GPU
against GPU arrived.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from coordinator.scoring.fragmentation import Fragmentation
from coordinator.state.cluster import MILLI_PER_GPU, ClusterState
from coordinator.state.podrequest import PodRequest
from hack.sim.replay import ClusterFragmentation


@dataclass
class Tally:
    """One scheduler's run, pod by pod."""

    label: str
    state: ClusterState
    measure: Fragmentation
    arrived: list[int] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    pending: int = 0
    _frag: ClusterFragmentation = field(init=False)

    def __post_init__(self) -> None:
        self._frag = ClusterFragmentation(self.state, self.measure)

    def record(self, pod: PodRequest, node: int | None) -> None:
        """The pod arrived and went to ``node`` (None: it stays pending)."""
        arrived = (self.arrived[-1] if self.arrived else 0) + pod.gpu_total_milli
        used = self.used[-1] if self.used else 0
        if node is None:
            self.pending += 1
        else:
            used += pod.gpu_total_milli
            self._frag.changed(node)
        self.arrived.append(arrived)
        self.used.append(used)

    @property
    def fragmentation_milli(self) -> float:
        return self._frag.total


def figures(tally: Tally) -> dict[str, str]:
    """The table's rows for one column, in order."""
    s = tally.state
    total = s.gpu_total_milli
    real = s.gpu_cap == MILLI_PER_GPU
    gpus_in_use = int(((s.gpu_free < MILLI_PER_GPU) & real).sum())
    used = tally.used[-1] if tally.used else 0
    placed = len(tally.used) - tally.pending
    nodes_used = int((s.cpu_free < s.cpu_cap).sum())
    return {
        "pods placed": f"{placed} / {len(tally.used)}",
        "pods pending": str(tally.pending),
        "nodes used": f"{nodes_used} / {len(s)}",
        "GPUs in use (any share)": f"{gpus_in_use} / {int(real.sum())}",
        "GPU allocated": f"{used / MILLI_PER_GPU:.1f} of {total // MILLI_PER_GPU} GPUs",
        "unallocated GPU": f"{_pct(total - used, total)} %",
        "  when 100 % had arrived": _unallocated_at(tally, total),
        "GPU fragmentation (FGD)": f"{_pct(tally.fragmentation_milli, total)} % of GPUs",
    }


def table(columns: list[Tally]) -> str:
    """The figures of each column side by side, one row per figure."""
    cells = [figures(t) for t in columns]
    rows = list(cells[0])
    head = max(len(r) for r in rows)
    labels = [t.label for t in columns]
    widths = [
        max(len(label), *(len(c[r]) for r in rows)) for label, c in zip(labels, cells, strict=True)
    ]
    lines = [" " * head + "".join(f"   {x:>{w}}" for x, w in zip(labels, widths, strict=True))]
    for row in rows:
        values = (f"   {c[row]:>{w}}" for c, w in zip(cells, widths, strict=True))
        lines.append(f"{row:<{head}}" + "".join(values))
    return "\n".join(lines)


def plot(path: Path, columns: list[Tally], title: str) -> None:
    """PNG: unallocated GPU (% of the cluster's) against GPU arrived, per column."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for tally in columns:
        total = tally.state.gpu_total_milli
        arrived = 100 * np.asarray(tally.arrived, dtype=float) / total
        unallocated = 100 * (total - np.asarray(tally.used, dtype=float)) / total
        ax.plot(arrived, unallocated, label=tally.label)
    ax.set_title(title)
    ax.set_xlabel("GPU arrived (% of the cluster's GPUs)")
    ax.set_ylabel("unallocated GPU (%)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _unallocated_at(tally: Tally, total: int) -> str:
    """Unallocated GPU once the pods that arrived asked for all the cluster's GPUs (the
    point FGD's evaluation reads first); "–" before that point."""
    reached = np.flatnonzero(np.asarray(tally.arrived) >= total)
    if not len(reached):
        return "–"
    return f"{_pct(total - tally.used[int(reached[0])], total)} %"


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}" if whole else "–"
