"""The limit: a lower bound on U@100 that no add-only policy can beat.

An add-only policy decides each pod once and never moves it, so after any event the GPU
it has allocated is that of some subset of the pods arrived so far, placed feasibly. The
most GPU any such placement can hold is at most the optimum of a linear relaxation of the
packing problem over those pods; ``U_bound = 100 − 100 · LP* / cluster GPU milli`` is
therefore at most the unallocated GPU % of every policy after every event. U@100 averages
the events at x = 100 (:func:`hack.sim.replay.events_at`); the relaxation takes every pod
arrived by the last of them, so it bounds each of them and their mean.

Nodes are grouped into pools of identical nodes (GPU model, GPUs per node, CPU, memory),
pods into types (CPU, memory, GPUs, milli per GPU, accepted models) with a count ``n_t``.
CPU-only pods are left out: a policy may refuse them, and leaving pods out only lets the
optimum grow. Variable ``x[t, p] ≥ 0``: pods of type t placed in pool p, only where one
node of p could hold such a pod alone (model accepted, enough GPUs, CPU and memory per
node). Maximise ``Σ x[t, p] · gpus_t · milli_t`` subject to, with N_p nodes of G_p GPUs,
C_p CPU and M_p memory in pool p — each constraint holds for every feasible placement:

- demand: ``Σ_p x[t, p] ≤ n_t`` — a pod is placed at most once;
- GPU milli: ``Σ_t x · gpus_t · milli_t ≤ 1000 · N_p · G_p`` — a device holds 1000 milli;
- CPU and memory: ``Σ_t x · cpu_t ≤ N_p · C_p``, the same for memory;
- items per device, j = 1, 2, 3: ``Σ_{t: milli_t < 1000, milli_t > 1000/(j+1)} x · gpus_t
  + j · Σ_{t: milli_t = 1000} x · gpus_t ≤ j · N_p · G_p`` — a device holds at most j
  shares above 1000/(j+1) (j + 1 of them would exceed 1000), and a device a whole-GPU pod
  takes holds nothing else, so it counts j. For j = 1: two pods of more than half a GPU
  never share one;
- whole multi-GPU pods, k = 2 … G_p: ``Σ_{t: milli_t = 1000, gpus_t ≥ k} x ≤ N_p ·
  ⌊G_p / k⌋`` — such pods take distinct whole devices, so a node holds at most ⌊G_p/k⌋ of
  them (three 3-GPU pods do not fit an 8-GPU node, though 9 ≤ 8 · 8/3 in milli);
- big pods per node, j = 1, 2, 3: ``Σ_{t: cpu_t > C_p/(j+1)} x ≤ j · N_p`` — a node holds
  at most j pods each above 1/(j+1) of its CPU; the same for memory;
- dual feasible functions, for each α in (0, 500] where one changes for a share of the
  workload: ``Σ_t x · gpus_t · u_α(milli_t) ≤ 1000 · N_p · G_p``, u_α counting a share
  above 1000 − α as a whole device and one below α as nothing — the shares one device
  holds still add up to at most 1000 under u_α.

The LP is solved with HiGHS (scipy's ``linprog``): a few hundred variables, milliseconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from scipy.optimize import linprog  # type: ignore[import-untyped]

from coordinator.state.cluster import MILLI_PER_GPU, NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim import replay

ITEM_LEVELS: Final = (1, 2, 3)
"""j of the per-device and per-node item counts."""


@dataclass(frozen=True, slots=True)
class Pool:
    model: str
    gpus: int
    cpu_m: int
    mem_b: int
    nodes: int


@dataclass(frozen=True, slots=True)
class PodType:
    cpu_m: int
    mem_b: int
    gpus: int
    milli: int
    models: frozenset[str]

    def fits(self, pool: Pool) -> bool:
        """Whether one empty node of ``pool`` could hold one such pod."""
        return (
            (not self.models or pool.model in self.models)
            and pool.gpus >= self.gpus
            and pool.cpu_m >= self.cpu_m
            and pool.mem_b >= self.mem_b
        )


def pools(nodes: Sequence[NodeSpec]) -> list[Pool]:
    """The GPU nodes grouped by kind."""
    kinds = Counter((n.gpu_model, n.gpus, n.cpu_m, n.mem_b) for n in nodes if n.gpus)
    return [Pool(m, g, c, b, count) for (m, g, c, b), count in sorted(kinds.items())]


def max_allocation(nodes: Sequence[NodeSpec], pods: Sequence[PodRequest]) -> float:
    """LP*: an upper bound, in milli-GPU, on the GPU any placement of a subset of ``pods``
    on ``nodes`` can allocate (the constraints are in the module docstring)."""
    types = Counter(
        PodType(p.cpu_m, p.mem_b, p.gpus, p.gpu_milli, p.gpu_models) for p in pods if p.gpus
    )
    kinds = pools(nodes)
    pairs = [(t, p) for t in types for p in range(len(kinds)) if t.fits(kinds[p])]
    if not pairs:
        return 0.0
    thresholds = _thresholds({t.milli for t in types})
    rows: list[np.ndarray] = []
    bounds: list[float] = []

    def add(coefficients: list[float], bound: float) -> None:
        if any(coefficients):
            rows.append(np.array(coefficients))
            bounds.append(bound)

    for t, count in types.items():
        add([1.0 if u == t else 0.0 for u, _ in pairs], count)
    for p, pool in enumerate(kinds):
        here = [(u, q == p) for u, q in pairs]
        devices = pool.nodes * pool.gpus
        add([u.gpus * u.milli * on for u, on in here], MILLI_PER_GPU * devices)
        add([u.cpu_m * on for u, on in here], pool.nodes * pool.cpu_m)
        add([u.mem_b * on for u, on in here], pool.nodes * pool.mem_b)
        for j in ITEM_LEVELS:
            add([u.gpus * _items(u.milli, j) * on for u, on in here], j * devices)
            add([float(on and u.cpu_m * (j + 1) > pool.cpu_m) for u, on in here], j * pool.nodes)
            add([float(on and u.mem_b * (j + 1) > pool.mem_b) for u, on in here], j * pool.nodes)
        for alpha in thresholds:
            add([u.gpus * _dff(u.milli, alpha) * on for u, on in here], MILLI_PER_GPU * devices)
        for k in range(2, pool.gpus + 1):
            whole = [float(on and u.milli == MILLI_PER_GPU and u.gpus >= k) for u, on in here]
            add(whole, pool.nodes * (pool.gpus // k))
    gain = np.array([-float(t.gpus * t.milli) for t, _ in pairs])
    result = linprog(
        gain, A_ub=np.array(rows), b_ub=np.array(bounds), bounds=(0, None), method="highs"
    )
    if result.status != 0:
        raise RuntimeError(f"the bound's linear program failed: {result.message}")
    return float(-result.fun)


def _items(milli: int, j: int) -> int:
    """What one device of a pod counts towards "at most j items per device"."""
    if milli >= MILLI_PER_GPU:
        return j
    return 1 if milli * (j + 1) > MILLI_PER_GPU else 0


def _dff(milli: int, alpha: int) -> int:
    """The dual feasible function u_α of one device's share: a share above 1000 − α counts
    the whole device, one below α nothing, the others themselves."""
    if milli > MILLI_PER_GPU - alpha:
        return MILLI_PER_GPU
    return milli if milli >= alpha else 0


def _thresholds(shares: set[int]) -> list[int]:
    """The α in (0, 500] where u_α changes for some share: α = m makes shares m count,
    α = 1001 − m makes them count a whole device."""
    out = {m for m in shares if m <= MILLI_PER_GPU // 2}
    out |= {MILLI_PER_GPU + 1 - m for m in shares if MILLI_PER_GPU // 2 < m < MILLI_PER_GPU}
    return sorted(out)


def limit(nodes: Sequence[NodeSpec], pods: Sequence[PodRequest], point: int = 100) -> float | None:
    """The lowest unallocated GPU % any add-only policy can show at x = ``point`` when
    ``pods`` arrive in this order (the events x = ``point`` averages, as the simulator
    bins them); None when no event falls there (nor does a U at x = ``point``)."""
    total = sum(n.gpus for n in nodes) * MILLI_PER_GPU
    arrived = np.cumsum([p.gpu_total_milli for p in pods], dtype=np.int64)
    at = replay.events_at(replay.x_of(arrived, total), point)
    if not len(at):
        return None
    return 100.0 - 100.0 * max_allocation(nodes, pods[: int(at[-1]) + 1]) / total
