"""What the pods seen so far say about the pods to come.

A live coordinator sees pods as they arrive; the simulator tells a policy about each
arrival after deciding it. Either way the model learns only from the past: the typical
shapes (FGD's target workload M), how much CPU the GPU pods bring per milli-GPU, and how
much of the GPU demand can only go to some GPU models.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Final

from coordinator.scoring.fragmentation import Shape, typical_shapes
from coordinator.state.podrequest import PodRequest

# Before enough GPU pods were seen, assume the CPU per GPU of the FGD authors' trace
# (about 11.6 cores per GPU); it only steers until real data replaces it.
DEFAULT_CPU_M_PER_GPU_MILLI: Final = 11.6


class WorkloadModel:
    """Counts of pod shapes, CPU/GPU totals and GPU demand per accepted models over the
    pods observed."""

    def __init__(self) -> None:
        self.shapes: Counter[Shape] = Counter()
        self.pods = 0
        self._gpu_pod_cpu_m = 0
        self._gpu_pod_milli = 0
        self.gpu_milli_by_models: Counter[frozenset[str]] = Counter()
        """GPU milli the GPU pods asked for, by the models they accept (empty: any)."""

    def observe(self, pod: PodRequest) -> None:
        self.shapes[Shape.of(pod)] += 1
        self.pods += 1
        if pod.gpus:
            self._gpu_pod_cpu_m += pod.cpu_m
            self._gpu_pod_milli += pod.gpu_total_milli
            self.gpu_milli_by_models[pod.gpu_models] += pod.gpu_total_milli

    def pool_pressure(self, free: Mapping[str, int]) -> dict[str, float]:
        """Per GPU model (``free``: its free milli-GPU now), the share of that free GPU the
        pods limited to some models will take as the cluster fills, 0..1.

        Pods seen so far say which share of the GPU demand can only go to some models; each
        such demand is split over its models by their free GPU. If the demand keeps coming
        at that rate, while the cluster's free GPU is used up a pool receives ``share ×
        cluster free``: against the pool's own free GPU that is its pressure (1: every
        free GPU of it will be wanted by pods that cannot go elsewhere)."""
        pressure = dict.fromkeys(free, 0.0)
        if not self._gpu_pod_milli:
            return pressure
        need = dict.fromkeys(free, 0.0)
        for models, milli in self.gpu_milli_by_models.items():
            members = [m for m in sorted(models) if free.get(m, 0) > 0]
            room = sum(free[m] for m in members)
            for m in members:
                need[m] += milli * free[m] / room
        cluster_free = sum(free.values())
        for m, f in free.items():
            expected = need[m] / self._gpu_pod_milli * cluster_free
            pressure[m] = min(1.0, expected / f) if f > 0 else 1.0
        return pressure

    def typical(self, coverage: float) -> list[tuple[Shape, float]]:
        """The typical shapes and their weights (see :func:`typical_shapes`)."""
        pods = [
            PodRequest("seen", s.cpu_m, 0, s.gpus, s.gpu_milli, frozenset(s.models))
            for s, n in self.shapes.items()
            for _ in range(n)
        ]
        return typical_shapes(pods, coverage)

    @property
    def cpu_m_per_gpu_milli(self) -> float:
        """CPU the GPU pods bring per milli-GPU they use."""
        if not self._gpu_pod_milli:
            return DEFAULT_CPU_M_PER_GPU_MILLI
        return self._gpu_pod_cpu_m / self._gpu_pod_milli
