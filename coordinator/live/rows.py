"""Which row of the cluster state each name of a scheduler's node list is, remembered for
the few long lists kube-scheduler keeps offering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.state.cluster import ClusterState


@dataclass(frozen=True, slots=True)
class Rows:
    """A name list as the state sees it, every array read-only and in the list's order."""

    index: npt.NDArray[np.int64]
    """Each name's row; -1 for a name not known."""
    known: npt.NDArray[np.bool_]
    """Whether each name is known."""
    names: npt.NDArray[np.object_]
    """The names themselves, so that answers pick theirs out by mask, not name by name."""


class RowMemo:
    """Rows of the last few long name lists offered, for the current cluster state.

    kube-scheduler offers the same list again and again (every feasible node, in the same
    order, pod after pod), and comparing a list with the one seen before costs a tenth of
    looking every name up."""

    SIZE: Final = 4
    SHORTEST: Final = 256
    """Shorter lists are looked up afresh (Volcano's predicate offers one node a call)."""

    def __init__(self) -> None:
        self.state: ClusterState | None = None
        self.lists: dict[tuple[int, str, str], tuple[list[str], Rows]] = {}

    def rows(self, state: ClusterState, names: Sequence[str]) -> Rows:
        """Each name's row in ``state`` (see :class:`Rows`)."""
        if state is not self.state:  # rebuilt: rows moved
            self.state, self.lists = state, {}
        key = (len(names), names[0], names[-1]) if len(names) >= self.SHORTEST else None
        if key is not None and key in self.lists:
            seen, rows = self.lists[key]
            if seen == names:
                return rows
        count = len(names)
        index = np.fromiter(map(state.index.get, names, repeat(-1, count)), np.int64, count)
        known = index >= 0
        array = np.empty(count, dtype=object)
        array[:] = names
        for part in (index, known, array):
            part.flags.writeable = False
        rows = Rows(index, known, array)
        if key is not None:
            if key not in self.lists and len(self.lists) >= self.SIZE:
                del self.lists[next(iter(self.lists))]  # the oldest
            self.lists[key] = (list(names), rows)
        return rows
