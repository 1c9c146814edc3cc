"""``most-allocated``: kube-scheduler's MostAllocated NodeResourcesFit strategy (packs).

Per resource ``requested·100/capacity`` (requested capped at capacity, integer
arithmetic), requested including the incoming pod, averaged with the configured weights.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.scoring.resources import WeightedResourcePolicy

NAME: Final = "most-allocated"


def most_requested(
    requested: npt.NDArray[np.int64], capacity: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    score: npt.NDArray[np.int64] = np.minimum(requested, capacity) * 100 // capacity
    return score


class MostAllocated(WeightedResourcePolicy):
    name = NAME
    per_resource = most_requested
