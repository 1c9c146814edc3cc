"""GPU fragmentation as FGD (Weng et al., USENIX ATC'23) measures it.

A node's free GPU capacity is *fragmented* for a task shape when the task cannot use it:
all of it if the task cannot run on the node at all (no GPU needed, wrong model, not
enough CPU or not enough GPUs with room), otherwise the free milli on devices too small
for the task. Weighted over the *typical* task shapes of the workload (the most common
shapes covering 95 % of tasks) this gives the expected fragmentation of a node, F_n(M),
in milli-GPU. It depends only on the node's free CPU, the multiset of free milli per GPU
and the GPU model, so it is memoised on exactly that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from coordinator.state.podrequest import PodRequest

TYPICAL_COVERAGE: Final = 0.95


class _Orderable(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


S = TypeVar("S", bound=_Orderable)


@dataclass(frozen=True, slots=True, order=True)
class Shape:
    """A task shape as fragmentation sees it (memory plays no part)."""

    cpu_m: int
    gpu_milli: int
    gpus: int
    models: tuple[str, ...] = ()

    @classmethod
    def of(cls, pod: PodRequest) -> Shape:
        return cls(pod.cpu_m, pod.gpu_milli, pod.gpus, tuple(sorted(pod.gpu_models)))


def typical_shapes(
    pods: Iterable[PodRequest], coverage: float = TYPICAL_COVERAGE
) -> list[tuple[Shape, float]]:
    """The most common shapes covering ``coverage`` of the pods, with renormalised weights.

    Shapes are taken by count, the larger shape first among equal counts, until their pods
    reach the coverage — the reference implementation's order, which decides which shape
    makes the cut.
    """
    return most_common(Counter(Shape.of(p) for p in pods), coverage)


def most_common(counts: Counter[S], coverage: float = TYPICAL_COVERAGE) -> list[tuple[S, float]]:
    """The shapes of :func:`typical_shapes` from their counts, for any orderable shape (the
    MIG view counts MIG shapes the same way)."""
    total = sum(counts.values())
    if not total:
        return []
    chosen: list[tuple[S, int]] = []
    covered = 0
    for shape, count in sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True):
        chosen.append((shape, count))
        covered += count
        if covered >= coverage * total:
            break
    return [(shape, count / covered) for shape, count in chosen]


class Fragmentation:
    """F_n(M) for a fixed target workload M, memoised on node state.

    The memo is keyed by the devices in the order given (a placement changes one node, and
    the same tuples recur), then by the sorted multiset the value really depends on. A miss
    adds ``weight × fragment`` shape by shape in their fixed order (the reference's
    additions, so the floats agree with it to the bit), measuring each distinct per-GPU
    size against the devices only once. A shape's fragment is the node's idle milli when
    it cannot run there at all (no GPU needed, wrong model, too little CPU, too few devices
    with room), else the idle milli on devices too small for it.
    """

    def __init__(self, shapes: Sequence[tuple[Shape, float]]) -> None:
        self.shapes = list(shapes)
        self._plan = [(s.gpus, s.models, s.cpu_m, s.gpu_milli, w) for s, w in self.shapes]
        """The shapes as plain tuples: a miss reads every shape, and a new pod shape misses
        once per distinct node state."""
        self._memo: dict[tuple[int, tuple[int, ...], str], float] = {}
        self._sorted_memo: dict[tuple[int, tuple[int, ...], str], float] = {}

    def node(self, cpu_free: int, gpus: tuple[int, ...], model: str) -> float:
        """Expected fragmented milli-GPU of a node in this state."""
        key = (cpu_free, gpus, model)
        value = self._memo.get(key)
        if value is None:
            ordered = (cpu_free, tuple(sorted(gpus, reverse=True)), model)
            value = self._sorted_memo.get(ordered)
            if value is None:
                value = self._sorted_memo[ordered] = self._compute(cpu_free, ordered[1], model)
            self._memo[key] = value
        return value

    def _compute(self, cpu_free: int, gpus: tuple[int, ...], model: str) -> float:
        idle = 0
        for g in gpus:
            if g > 0:
                idle += g
        by_milli: dict[int, tuple[int, int]] = {}  # per-GPU size -> (devices fitting, small sum)
        value = 0.0
        for need, models, cpu_m, milli, weight in self._plan:
            if not need or (models and model not in models) or cpu_free < cpu_m:
                value += weight * idle
                continue
            fit = by_milli.get(milli)
            if fit is None:
                fitting = small = 0
                for g in gpus:
                    if g >= milli:
                        fitting += 1
                    elif g > 0:
                        small += g
                fit = by_milli[milli] = (fitting, small)
            value += weight * (idle if fit[0] < need else fit[1])
        return value
