"""What the pods seen so far say about the pods to come.

A live coordinator sees pods as they arrive; the simulator tells a policy about each
arrival after deciding it. Either way the model learns only from the past: the typical
shapes (FGD's target workload M) and how much CPU the GPU pods bring per milli-GPU.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from coordinator.scoring.fragmentation import Shape, typical_shapes
from coordinator.state.podrequest import PodRequest

# Before enough GPU pods were seen, assume the CPU per GPU of the FGD authors' trace
# (about 11.6 cores per GPU); it only steers until real data replaces it.
DEFAULT_CPU_M_PER_GPU_MILLI: Final = 11.6


class WorkloadModel:
    """Counts of pod shapes and CPU/GPU totals over the pods observed."""

    def __init__(self) -> None:
        self.shapes: Counter[Shape] = Counter()
        self.pods = 0
        self._gpu_pod_cpu_m = 0
        self._gpu_pod_milli = 0

    def observe(self, pod: PodRequest) -> None:
        self.shapes[Shape.of(pod)] += 1
        self.pods += 1
        if pod.gpus:
            self._gpu_pod_cpu_m += pod.cpu_m
            self._gpu_pod_milli += pod.gpu_total_milli

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
