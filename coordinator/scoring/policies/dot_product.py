"""``dot-product``: the FGD authors' DotProduct baseline (dimension ``merge``, norm ``max``).

Node vector = free (CPU/128000, GPU/8000), pod vector = requested (CPU/128000, GPU/8000);
score ``int(100·(1 − node·pod/2))``, so the node with the *smallest* dot product wins —
the reverse of Tetris's alignment rule, as their code does. Devices: best fit.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from coordinator.scoring.base import Policy
from coordinator.scoring.policies.best_fit import MAX_SPEC_CPU_M, MAX_SPEC_GPU_MILLI
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

NAME: Final = "dot-product"


class DotProduct(Policy):
    name = NAME

    def shape_key(self, pod: PodRequest) -> Hashable:
        return (pod.cpu_m, pod.gpu_total_milli)

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        node = (int(state.cpu_free[i]) / MAX_SPEC_CPU_M, state.gpu_idle_of(i) / MAX_SPEC_GPU_MILLI)
        ask = (pod.cpu_m / MAX_SPEC_CPU_M, pod.gpu_total_milli / MAX_SPEC_GPU_MILLI)
        dot = (node[0] * ask[0] + node[1] * ask[1]) / 2
        return float(int(100 * (1 - dot)))
