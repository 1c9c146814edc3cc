"""``most-allocated``: kube-scheduler's MostAllocated NodeResourcesFit strategy (packs).

Per resource ``requested·100/capacity`` (requested capped at capacity, integer
arithmetic), requested including the incoming pod, averaged with the configured weights.
"""

from __future__ import annotations

from typing import Final

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
        return weighted_average(state, i, pod, self.weights, most_requested)


def most_requested(requested: int, capacity: int) -> int:
    return min(requested, capacity) * 100 // capacity
