"""``random``: a uniformly random feasible node, and a random device among those that fit.

The FGD paper's weakest baseline. Draws come from the policy's own generator, seeded, so a
simulation is repeatable (the reference's draw depends on a parallel filter's order and
cannot be).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.scoring.base import Policy
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

NAME: Final = "random"


class RandomFit(Policy):
    name = NAME

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def shape_key(self, pod: PodRequest) -> Hashable | None:
        return None

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        return float(self.rng.random())

    def score_nodes(
        self, state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        return self.rng.random(len(nodes))

    def devices(self, state: ClusterState, i: int, pod: PodRequest) -> tuple[int, ...]:
        if not pod.gpus:
            return ()
        fits = np.flatnonzero(state.gpu_free[i] >= pod.gpu_milli)
        if pod.sharing:
            return (int(self.rng.choice(fits)),)
        return tuple(int(d) for d in fits[: pod.gpus])
