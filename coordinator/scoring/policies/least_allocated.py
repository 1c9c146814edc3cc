"""``least-allocated``: kube-scheduler's default NodeResourcesFit strategy (spreads pods).

Per resource ``(capacity − requested)·100/capacity`` in integer arithmetic, requested
including the incoming pod, averaged with the configured weights over resources the node
has. A reference point for what Stowage replaces, not a packing policy.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.scoring.resources import WeightedResourcePolicy

NAME: Final = "least-allocated"


def least_requested(
    requested: npt.NDArray[np.int64], capacity: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    score: npt.NDArray[np.int64] = np.where(
        requested > capacity, 0, (capacity - requested) * 100 // capacity
    )
    return score


class LeastAllocated(WeightedResourcePolicy):
    name = NAME
    per_resource = least_requested
