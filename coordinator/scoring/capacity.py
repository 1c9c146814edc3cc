"""Whether a node has room for a pod: the one definition of node capacity that the engine
(which nodes are feasible) and the live filter (why a node is not, in words) both read.

A node has room when it has the CPU and the memory free (memory as the agent found it
really allocatable, where measured: :meth:`ClusterState.mem_free_effective`), enough GPU
devices with the pod's share free each, and a GPU model the pod accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

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
    with_room = None
    if gpus:
        if isinstance(nodes, slice) or len(nodes) * WHOLE_STATE_SHARE >= len(state):
            with_room = devices_with_room(state.gpu_free, pod.gpu_milli)[nodes]
        else:  # a few rows: count on their copy
            with_room = devices_with_room(state.gpu_free[nodes], pod.gpu_milli)
    if constrained and model_ok is None:
        model_ok = models_allowed(state, pod.gpu_models)
    return Room(
        cpu_free=state.cpu_free[nodes],
        mem_free=state.mem_free_effective()[nodes],
        gpu_count=state.gpu_count[nodes] if gpus else None,
        gpus_with_room=with_room,
        model_id=state.model_id[nodes] if constrained else None,
        model_ok=model_ok if constrained else None,
    )


WHOLE_STATE_SHARE: Final = 4
"""Asked about at least a quarter of the nodes, devices are counted on every node and
the rows asked for taken from that: cheaper than copying the rows' device matrix first."""


def devices_with_room(gpu_free: npt.NDArray[np.int64], milli: int) -> npt.NDArray[np.int64]:
    """Per row of a device matrix (padded with -1), how many devices have ``milli`` free.

    Counted eight devices at a time: a row's comparisons, one byte each, are read as one
    64-bit word and its set bits counted — a tenth of the time of summing booleans along
    short rows, which numpy does element by element."""
    rows, width = gpu_free.shape
    words = -(-width // 8)
    fits = np.zeros((rows, words * 8), dtype=bool)
    np.greater_equal(gpu_free, milli, out=fits[:, :width])
    counts = np.bitwise_count(fits.view(np.uint64))
    if words == 1:
        return counts[:, 0].astype(np.int64)
    total: npt.NDArray[np.int64] = counts.sum(axis=1, dtype=np.int64)
    return total


def models_allowed(state: ClusterState, models: frozenset[str]) -> npt.NDArray[np.bool_]:
    """Per model id of ``state``, whether it is one of ``models``."""
    return np.array([m in models for m in state.models], dtype=bool)
