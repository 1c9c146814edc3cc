"""Why a node cannot take a pod, in words a human reads in ``kubectl describe pod``.

Capacity first (what every scheduler checks, against true allocatable memory where an
agent measured it), then what only Stowage sees, each switchable in the settings:

* memory contiguity — a pod needing contiguous memory skips nodes whose free memory in
  2 MiB blocks is below the threshold or its need;
* real load — batch pods skip nodes whose measured CPU use or CPU pressure is above the
  threshold;
* NUMA — a pod kubelet will pin to one NUMA node skips nodes where no NUMA node can hold
  it (kubelet would reject it at admission, after the scheduler bound it).

A node with no fresh report has unknown signals: only capacity applies to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.config import SignalSettings
from coordinator.scoring.base import PodRequest
from coordinator.state.cluster import ClusterState

MIB: Final = 2**20
ALIGNING_POLICIES: Final = frozenset({"single-numa-node", "restricted"})


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: str
    unresolvable: bool
    """True when evicting pods would not help (wrong GPU model, NUMA node too small)."""


def rejections(
    state: ClusterState,
    pod: PodRequest,
    nodes: npt.NDArray[np.int64],
    settings: SignalSettings,
) -> dict[int, Rejection]:
    """Node index → why it cannot take the pod, for the nodes in ``nodes`` that cannot."""
    out: dict[int, Rejection] = {}
    mem_free = state.mem_free_effective() if settings.true_allocatable else state.mem_free
    for i in nodes.tolist():
        rejection = _capacity(state, i, pod, int(mem_free[i])) or _live(state, i, pod, settings)
        if rejection is not None:
            out[i] = rejection
    return out


def _capacity(state: ClusterState, i: int, pod: PodRequest, mem_free: int) -> Rejection | None:
    if pod.gpus:
        model = state.models[state.model_id[i]]
        if pod.gpu_models and model not in pod.gpu_models:
            wanted = ", ".join(sorted(pod.gpu_models))
            return Rejection(f"GPU model {model or 'none'} is not one of {wanted}", True)
        if state.gpu_count[i] < pod.gpus:
            return Rejection(f"{state.gpu_count[i]} GPUs on the node < {pod.gpus} requested", True)
        room = int((state.gpu_free[i] >= pod.gpu_milli).sum())
        if room < pod.gpus:
            return Rejection(
                f"{room} GPUs with {pod.gpu_milli} milli free < {pod.gpus} requested", False
            )
    cpu_free = int(state.cpu_free[i])
    if cpu_free < pod.cpu_m:
        return Rejection(f"CPU {cpu_free}m free < {pod.cpu_m}m requested", False)
    if mem_free < pod.mem_b:
        return Rejection(
            f"memory {_mib(max(0, mem_free))} free < {_mib(pod.mem_b)} requested", False
        )
    return None


def _live(
    state: ClusterState, i: int, pod: PodRequest, settings: SignalSettings
) -> Rejection | None:
    if pod.contiguous_b:
        contiguous = int(state.contiguous_2mib_b[i])
        need = max(pod.contiguous_b, settings.contiguity_threshold_b)
        if 0 <= contiguous < need:
            return Rejection(f"memory contiguity {_mib(contiguous)} < {_mib(need)} needed", False)
    if pod.batch:
        threshold = settings.cpu_utilization_threshold_pct
        for label, value in (
            ("CPU use", float(state.cpu_used_pct[i])),
            ("CPU pressure", float(state.cpu_pressure_pct[i])),
        ):
            if not math.isnan(value) and value > threshold:
                return Rejection(f"real load: {label} {value:.0f} % > {threshold:g} %", False)
    if (
        settings.numa_alignment
        and pod.numa_aligned
        and state.topology_policy[i] in ALIGNING_POLICIES
        and 0 <= state.largest_numa_cpu_m[i] < pod.cpu_m
    ):
        cpus = int(state.largest_numa_cpu_m[i]) // 1000
        return Rejection(
            f"NUMA: no NUMA node holds {pod.cpu_m // 1000} CPUs (largest has {cpus}); "
            f"topology manager policy {state.topology_policy[i]}",
            True,
        )
    return None


def _mib(b: int) -> str:
    return f"{b // MIB} MiB"
