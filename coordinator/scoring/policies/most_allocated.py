"""``most-allocated``: kube-scheduler's MostAllocated NodeResourcesFit strategy (packs).

Per resource ``requested·100/capacity`` (requested capped at capacity, integer
arithmetic), requested including the incoming pod, averaged with the configured weights.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.scoring.base import Policy
from coordinator.scoring.resources import ResourceWeights, weighted_average
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

NAME: Final = "most-allocated"


class MostAllocated(Policy):
    name = NAME

    def __init__(self, weights: ResourceWeights) -> None:
        self.weights = weights

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        return float(self.score_nodes(state, pod, np.array([i]))[0])

    def score_nodes(
        self, state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        return weighted_average(state, nodes, pod, self.weights, most_requested)


def most_requested(
    requested: npt.NDArray[np.int64], capacity: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    score: npt.NDArray[np.int64] = np.minimum(requested, capacity) * 100 // capacity
    return score
