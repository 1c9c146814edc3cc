"""Resource weights shared by the kube-scheduler and Volcano formulas.

``cpu`` in millicores, ``memory`` in bytes and ``nvidia.com/gpu`` in milli-GPU, each
compared with the node's capacity of the same resource.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from common.errors import ConfigError
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


def requested_and_capacity(
    state: ClusterState, i: int, pod: PodRequest, weights: ResourceWeights
) -> Iterator[tuple[int, int, int]]:
    """(weight, requested including the pod, capacity) per weighted resource the node has —
    kube-scheduler skips resources with no capacity, and extended resources (the GPU) the
    pod does not request."""
    for name, weight in weights.weights.items():
        if name == GPU and not pod.gpu_total_milli:
            continue
        capacity, used = capacity_and_used(state, i, name)
        if capacity and weight:
            yield weight, used + request_of(pod, name), capacity


def weighted_average(
    state: ClusterState,
    i: int,
    pod: PodRequest,
    weights: ResourceWeights,
    per_resource: Callable[[int, int], int],
) -> float:
    """kube-scheduler's ``Σ score_r·w_r / Σ w_r`` in integer arithmetic, where
    ``per_resource(requested, capacity)`` scores one resource 0..100."""
    total = weight_sum = 0
    for weight, requested, capacity in requested_and_capacity(state, i, pod, weights):
        total += per_resource(requested, capacity) * weight
        weight_sum += weight
    return float(total // weight_sum) if weight_sum else 0.0
