"""Resource weights shared by the kube-scheduler and Volcano formulas.

``cpu`` in millicores, ``memory`` in bytes and ``nvidia.com/gpu`` in milli-GPU, each
compared with the node's capacity of the same resource.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Final

import numpy as np
import numpy.typing as npt

from common.errors import ConfigError
from coordinator.scoring.base import Policy
from coordinator.state.cluster import MILLI_PER_GPU, ClusterState
from coordinator.state.podrequest import PodRequest

GPU: Final = "nvidia.com/gpu"
KNOWN: Final = ("cpu", "memory", GPU)


@dataclass(frozen=True, slots=True)
class ResourceWeights:
    """Weight per resource; a resource not listed is not scored."""

    weights: Mapping[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1})

    def __post_init__(self) -> None:
        for name, weight in self.weights.items():
            if name not in KNOWN:
                raise ConfigError(f"resources.{name}: unknown resource; known: {', '.join(KNOWN)}")
            if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 100:
                raise ConfigError(f"resources.{name}: weight must be an integer 0..100")


def capacity_and_used(state: ClusterState, i: int, name: str) -> tuple[int, int]:
    """(capacity, in use) of one resource on node ``i``."""
    if name == "cpu":
        return int(state.cpu_cap[i]), int(state.cpu_cap[i] - state.cpu_free[i])
    if name == "memory":
        return int(state.mem_cap[i]), int(state.mem_cap[i] - state.mem_free[i])
    capacity = int(state.gpu_count[i]) * MILLI_PER_GPU
    return capacity, capacity - state.gpu_idle_of(i)


def request_of(pod: PodRequest, name: str) -> int:
    if name == "cpu":
        return pod.cpu_m
    if name == "memory":
        return pod.mem_b
    return pod.gpu_total_milli


def capacities_and_used(
    state: ClusterState, nodes: npt.NDArray[np.int64], name: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(capacity, in use) of one resource on each node of ``nodes``: a policy scores every
    node a score is missing for in one pass."""
    if name == "cpu":
        capacity = state.cpu_cap[nodes]
        return capacity, capacity - state.cpu_free[nodes]
    if name == "memory":
        capacity = state.mem_cap[nodes]
        return capacity, capacity - state.mem_free[nodes]
    free = state.gpu_free[nodes]
    capacity = state.gpu_count[nodes] * MILLI_PER_GPU
    return capacity, capacity - np.where(free > 0, free, 0).sum(axis=1)


def weighted_average(
    state: ClusterState,
    nodes: npt.NDArray[np.int64],
    pod: PodRequest,
    weights: ResourceWeights,
    per_resource: Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.int64]],
) -> npt.NDArray[np.float64]:
    """kube-scheduler's ``Σ score_r·w_r / Σ w_r`` in integer arithmetic per node of
    ``nodes``, where ``per_resource(requested, capacity)`` scores one resource 0..100
    (requested including the pod). Resources a node has no capacity of are skipped, as
    kube-scheduler skips them, and so are extended resources (the GPU) the pod does not
    request."""
    total = np.zeros(len(nodes), dtype=np.int64)
    weight_sum = np.zeros(len(nodes), dtype=np.int64)
    for name, weight in weights.weights.items():
        if not weight or (name == GPU and not pod.gpu_total_milli):
            continue
        capacity, used = capacities_and_used(state, nodes, name)
        has = capacity > 0
        score = per_resource(used + request_of(pod, name), np.where(has, capacity, 1))
        total += np.where(has, score * weight, 0)
        weight_sum += np.where(has, weight, 0)
    average = np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)
    return average.astype(np.float64)


PerResource = Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.int64]]
"""A NodeResourcesFit strategy's score of one resource: (requested, capacity) -> 0..100."""


class WeightedResourcePolicy(Policy):
    """kube-scheduler's NodeResourcesFit scoring: :data:`PerResource` averaged with the
    configured weights (:func:`weighted_average`), every node a call asks about in one
    NumPy pass; a strategy names only its per-resource score."""

    per_resource: ClassVar[PerResource]

    def __init__(self, weights: ResourceWeights) -> None:
        self.weights = weights

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        return float(self.score_nodes(state, pod, np.array([i]))[0])

    def score_nodes(
        self, state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        return weighted_average(state, nodes, pod, self.weights, type(self).per_resource)
