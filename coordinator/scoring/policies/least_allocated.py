"""``least-allocated``: kube-scheduler's default NodeResourcesFit strategy (spreads pods).

Per resource ``(capacity − requested)·100/capacity`` in integer arithmetic, requested
including the incoming pod, averaged with the configured weights over resources the node
has. A reference point for what Stowage replaces, not a packing policy.
"""

from __future__ import annotations

from typing import Final

from coordinator.scoring.base import Policy
from coordinator.scoring.resources import ResourceWeights, weighted_average
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

NAME: Final = "least-allocated"


class LeastAllocated(Policy):
    name = NAME

    def __init__(self, weights: ResourceWeights) -> None:
        self.weights = weights

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        return weighted_average(state, i, pod, self.weights, least_requested)


def least_requested(requested: int, capacity: int) -> int:
    return 0 if requested > capacity else (capacity - requested) * 100 // capacity
