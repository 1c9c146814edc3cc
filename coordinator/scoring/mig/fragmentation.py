"""MIG fragmentation, counted per profile the way FGD counts GPU shares.

FGD calls a node's free GPU capacity fragmented for a task when the task cannot use it.
On MIG GPUs a task asks for instances of one profile, and what it can use is decided by
the free slices and the placement rule, not by the free share: a GPU with four free
compute slices cannot take a 4g unless memory slices 0–3 are the free ones. So, for a
MIG shape (CPU, profile, instance count) and a node:

* if the node cannot serve it at all — too little CPU, or fewer placements of the profile
  on all its GPUs together than the shape asks — every free compute slice is fragmented;
* otherwise the free compute slices of the GPUs where the profile has no placement left.

Weighted over the typical MIG shapes of the workload (the most common ones covering 95 %
of MIG pods, :func:`coordinator.scoring.fragmentation.most_common`) that is the node's
expected fragmentation, in milli-GPU (a compute slice is 1000/7) so that FGD's score of
an increase applies unchanged. It depends only on the free CPU and the multiset of GPU
states, and is memoised on exactly that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from coordinator.scoring.fragmentation import TYPICAL_COVERAGE, most_common
from coordinator.scoring.mig.profiles import COMPUTE_SLICES, Geometry, Profile
from coordinator.scoring.mig.slices import Gpu, free_compute, free_starts, take
from coordinator.scoring.policies.fgd import sigmoid_score
from coordinator.state.cluster import MILLI_PER_GPU

MILLI_PER_SLICE: Final = MILLI_PER_GPU / COMPUTE_SLICES
MAX_MEMO: Final = 1 << 20
"""Node states remembered; past this the memo starts again (a replay of the openb trace
meets about 10^4)."""


@dataclass(frozen=True, slots=True, order=True)
class MigShape:
    """What a MIG pod asks, as fragmentation sees it."""

    cpu_m: int
    profile: str
    count: int


def typical(
    shapes: Iterable[MigShape], coverage: float = TYPICAL_COVERAGE
) -> list[tuple[MigShape, float]]:
    """The most common MIG shapes covering ``coverage`` of them, with their weights."""
    return most_common(Counter(shapes), coverage)


class MigFragmentation:
    """F_n(M) of MIG nodes of one geometry for a fixed target workload M."""

    def __init__(self, geometry: Geometry, shapes: Sequence[tuple[MigShape, float]]) -> None:
        self.geometry = geometry
        self._plan: list[tuple[Profile, int, int, float]] = []
        for shape, weight in shapes:
            profile = geometry.profile(shape.profile)
            if profile is None:
                raise ValueError(f"{shape.profile}: not a MIG profile of {geometry.model}")
            self._plan.append((profile, shape.count, shape.cpu_m, weight))
        self._memo: dict[tuple[int, tuple[Gpu, ...]], float] = {}

    def node(self, cpu_free: int, gpus: Sequence[Gpu]) -> float:
        """Expected fragmented milli-GPU of a node with ``cpu_free`` and these GPUs."""
        key = (cpu_free, tuple(sorted(gpus)))
        value = self._memo.get(key)
        if value is None:
            if len(self._memo) >= MAX_MEMO:
                self._memo.clear()
            value = self._memo[key] = self._compute(cpu_free, key[1])
        return value

    def _compute(self, cpu_free: int, gpus: tuple[Gpu, ...]) -> float:
        idle = sum(free_compute(g) for g in gpus)
        value = 0.0
        for profile, count, cpu_m, weight in self._plan:
            if cpu_free < cpu_m:
                value += weight * idle
                continue
            rooms = [len(free_starts(profile, g)) for g in gpus]
            if sum(rooms) < count:
                value += weight * idle
            else:
                value += weight * sum(
                    free_compute(g) for g, r in zip(gpus, rooms, strict=True) if not r
                )
        return value * MILLI_PER_SLICE


@dataclass(frozen=True, slots=True)
class MigChoice:
    """Where a MIG pod's instances go on one node, and FGD's score of it."""

    score: int
    taken: tuple[tuple[int, int], ...]
    """(GPU index, start slice) per instance."""
    gpus: tuple[Gpu, ...]
    """The node's GPUs afterwards."""
    before: float
    after: float


def best_choice(
    frag: MigFragmentation,
    cpu_free: int,
    cpu_m: int,
    gpus: Sequence[Gpu],
    profile: Profile,
    count: int,
) -> MigChoice | None:
    """The instances' placements that raise the node's fragmentation least, one instance
    at a time (lowest GPU index, then lowest start, among equals); None when the node
    cannot hold them. Each instance tries each distinct GPU state once."""
    if cpu_free < cpu_m:
        return None
    before = frag.node(cpu_free, gpus)
    state = list(gpus)
    taken: list[tuple[int, int]] = []
    after = before
    for _ in range(count):
        best: tuple[float, int, int] | None = None
        tried: set[Gpu] = set()
        for d, g in enumerate(state):
            if g in tried:
                continue
            tried.add(g)
            for s in free_starts(profile, g):
                trial = state[:d] + [take(profile, g, s)] + state[d + 1 :]
                value = frag.node(cpu_free - cpu_m, trial)
                if best is None or value < best[0]:
                    best = (value, d, s)
        if best is None:
            return None
        after, d, s = best
        state[d] = take(profile, state[d], s)
        taken.append((d, s))
    return MigChoice(sigmoid_score(after - before), tuple(taken), tuple(state), before, after)
