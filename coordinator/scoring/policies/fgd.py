"""``fgd``: Fragmentation Gradient Descent (Weng et al., USENIX ATC'23).

Place each task where it increases the expected GPU fragmentation F_n(M) the least
(:mod:`coordinator.scoring.fragmentation`). Faithful to the authors' plugin: the score is
``int(100·σ(−Δ/1000))`` with Δ = F_after − F_before in milli-GPU, so near Δ = 0 one step
is about 0.04 GPU and ties are common (they go to the fixed node rank). A shared-GPU task
is tried on every device with room and takes the first device reaching the best score; a
whole- or multi-GPU task is scored as if it took the fullest devices that fit (F depends
only on the multiset of free milli) and is bound to the lowest-index free ones.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.scoring.base import Policy
from coordinator.scoring.fragmentation import Fragmentation
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

NAME: Final = "fgd"


def sigmoid_score(delta_milli: float) -> int:
    """The plugin's integer score of a fragmentation increase ``delta_milli``."""
    x = delta_milli / 1000
    if x > 700:  # e^x would overflow; the sigmoid is 0 to double precision long before
        return 0
    return int(100 * (1.0 / (1.0 + math.exp(x))))


def after_take(gpus: tuple[int, ...], count: int, milli: int) -> tuple[int, ...]:
    """Free milli per device after ``count`` devices give ``milli``, fullest fitting first."""
    if count == 0:
        return gpus
    order = sorted((g, d) for d, g in enumerate(gpus) if g >= milli)[:count]
    out = list(gpus)
    for _, d in order:
        out[d] -= milli
    return tuple(out)


class Fgd(Policy):
    name = NAME

    def __init__(self, fragmentation: Fragmentation) -> None:
        self.frag = fragmentation

    def shape_key(self, pod: PodRequest) -> Hashable:
        return (pod.cpu_m, pod.gpus, pod.gpu_milli, pod.gpu_models)

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        return float(self._best(state, i, pod)[0])

    def score_nodes(
        self, state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """The score depends only on a node's free CPU, free milli per device and model (its
        ``state_id``): each distinct state among ``nodes`` is scored once."""
        if len(nodes) == 1:
            return np.array([self._best(state, int(nodes[0]), pod)[0]], dtype=np.float64)
        _, first, each = np.unique(state.state_id[nodes], return_index=True, return_inverse=True)
        per_state = [self._best(state, i, pod)[0] for i in nodes[first].tolist()]
        scores: npt.NDArray[np.float64] = np.array(per_state, dtype=np.float64)[each]
        return scores

    def devices(self, state: ClusterState, i: int, pod: PodRequest) -> tuple[int, ...]:
        if pod.sharing:
            return (self._best(state, i, pod)[1],)
        free = np.flatnonzero(state.gpu_free[i] >= pod.gpu_milli)
        return tuple(int(d) for d in free[: pod.gpus])

    def explain(self, state: ClusterState, i: int, pod: PodRequest) -> Mapping[str, float]:
        gpus = state.gpu_tuple(i)
        model = state.models[state.model_id[i]]
        before = self.frag.node(int(state.cpu_free[i]), gpus, model)
        score, device = self._best(state, i, pod)
        after_gpus = (
            tuple(g - pod.gpu_milli if d == device else g for d, g in enumerate(gpus))
            if pod.sharing
            else after_take(gpus, pod.gpus, pod.gpu_milli)
        )
        after = self.frag.node(int(state.cpu_free[i]) - pod.cpu_m, after_gpus, model)
        return {"frag_before_milli": before, "frag_after_milli": after, NAME: float(score)}

    def _best(self, state: ClusterState, i: int, pod: PodRequest) -> tuple[int, int]:
        """(score, device) — the device only matters for a shared GPU."""
        gpus = state.gpu_tuple(i)
        cpu = int(state.cpu_free[i])
        model = state.models[state.model_id[i]]
        before = self.frag.node(cpu, gpus, model)
        cpu_after = cpu - pod.cpu_m
        if not pod.sharing:
            after = self.frag.node(cpu_after, after_take(gpus, pod.gpus, pod.gpu_milli), model)
            return sigmoid_score(after - before), -1
        best, best_device = -1, -1
        tried = set()  # devices with equal free milli give equal F: try each value once
        for d, g in enumerate(gpus):
            if g < pod.gpu_milli or g in tried:
                continue
            tried.add(g)
            after_gpus = gpus[:d] + (g - pod.gpu_milli,) + gpus[d + 1 :]
            score = sigmoid_score(self.frag.node(cpu_after, after_gpus, model) - before)
            if score > best:
                best, best_device = score, d
        return best, best_device
