"""``best-fit``: the node left with the least free CPU and GPU after placement wins.

As in the FGD authors' baseline plugin: ``int(100·(1 − [½·(c−cpu)/128000 + ½·(R−gpu)/8000]))``
with c the free CPU (milli), R the free milli-GPU of the node, 128 000 and 8 000 the
largest CPU and GPU capacity of a node in their cluster. (Their min-max normalisation of
the integer scores never changes the winner, so it is left out.) Devices: best fit.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from coordinator.scoring.base import Policy
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

NAME: Final = "best-fit"
MAX_SPEC_CPU_M: Final = 128_000
MAX_SPEC_GPU_MILLI: Final = 8_000


class BestFit(Policy):
    name = NAME

    def shape_key(self, pod: PodRequest) -> Hashable:
        return (pod.cpu_m, pod.gpu_total_milli)

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        cpu_left = int(state.cpu_free[i]) - pod.cpu_m
        gpu_left = sum(g for g in state.gpu_tuple(i)) - pod.gpu_total_milli
        left = 0.5 * cpu_left / MAX_SPEC_CPU_M + 0.5 * gpu_left / MAX_SPEC_GPU_MILLI
        return float(int(100 * (1 - left)))
