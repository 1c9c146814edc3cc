"""Whether a node has room for a pod: the one definition of node capacity that the engine
(which nodes are feasible) and the live filter (why a node is not, in words) both read.

A node has room when it has the CPU and the memory free (memory as the agent found it
really allocatable, where measured: :meth:`ClusterState.mem_free_effective`), enough GPU
devices with the pod's share free each, and a GPU model the pod accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

Nodes = npt.NDArray[np.int64] | slice
"""Node indices, or ``slice(None)`` for every node (no copy)."""


@dataclass(frozen=True, slots=True)
class Room:
    """What each node of those asked about has for one pod, in their order."""

    cpu_free: npt.NDArray[np.int64]
    mem_free: npt.NDArray[np.int64]
    gpu_count: npt.NDArray[np.int64] | None
    """Devices per node; None for a pod without GPUs."""
    gpus_with_room: npt.NDArray[np.int64] | None
    """Devices with the pod's ``gpu_milli`` free; None for a pod without GPUs."""
    model_id: npt.NDArray[np.int64] | None
    """Each node's GPU model (an index into ``state.models``); None when any will do."""
    model_ok: npt.NDArray[np.bool_] | None
    """Per model id, whether the pod accepts it; None when any will do."""

    def fits(self, pod: PodRequest) -> npt.NDArray[np.bool_]:
        """Per node, whether the pod fits on every count."""
        ok = (self.cpu_free >= pod.cpu_m) & (self.mem_free >= pod.mem_b)
        if self.gpus_with_room is not None:
            ok &= self.gpus_with_room >= pod.gpus
        if self.model_ok is not None and self.model_id is not None:
            ok &= self.model_ok[self.model_id]
        return ok


def room(
    state: ClusterState,
    pod: PodRequest,
    nodes: Nodes,
    model_ok: npt.NDArray[np.bool_] | None = None,
) -> Room:
    """:class:`Room` of ``nodes`` for ``pod``; ``model_ok`` is :func:`models_allowed` of
    the pod's models when the caller keeps it already."""
    gpus = bool(pod.gpus)
    constrained = gpus and bool(pod.gpu_models)
    if constrained and model_ok is None:
        model_ok = models_allowed(state, pod.gpu_models)
    return Room(
        cpu_free=state.cpu_free[nodes],
        mem_free=state.mem_free_effective()[nodes],
        gpu_count=state.gpu_count[nodes] if gpus else None,
        gpus_with_room=(state.gpu_free[nodes] >= pod.gpu_milli).sum(axis=1) if gpus else None,
        model_id=state.model_id[nodes] if constrained else None,
        model_ok=model_ok if constrained else None,
    )


def models_allowed(state: ClusterState, models: frozenset[str]) -> npt.NDArray[np.bool_]:
    """Per model id of ``state``, whether it is one of ``models``."""
    return np.array([m in models for m in state.models], dtype=bool)
