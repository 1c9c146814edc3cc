"""kube-scheduler's own scoring, and how it adds an extender's answer to it.

The demo places pods the way a kube-scheduler with Stowage as its extender would, so the
parts of kube-scheduler that decide between nodes are written out here, in its integer
arithmetic (``pkg/scheduler/framework/plugins/noderesources``, ``schedule_one.go``):

* **NodeResourcesFit, LeastAllocated** (the default strategy, cpu and memory weighted 1):
  per resource ``(allocatable − requested) · 100 // allocatable``, 0 past allocatable,
  averaged by integer division. *Requested* counts a container without a CPU or memory
  request as 100m / 200 MiB (``NonZeroRequested``), the incoming pod included.
* **NodeResourcesBalancedAllocation** (cpu and memory): ``(1 − std) · 100`` truncated, std
  of the requested fractions (capped at 1) — for two resources ``|f_cpu − f_mem| / 2`` —
  with requests as written (no defaults). Skipped (0) for a pod that requests nothing.
* Each default score plugin has weight 1 or more, but only these two tell nodes apart
  when no node is tainted and no pod has affinities, spread constraints or images
  (TaintToleration, NodeAffinity, PodTopologySpread, InterPodAffinity and ImageLocality
  then give every node the same score), so the others are left out of the sum.
* **An extender's score** (0–10) adds ``score · weight · 10`` (``MaxNodeScore /
  MaxExtenderPriority``) to the sum; the best total wins, ties drawn at random.
* **How many nodes are looked at**: with 100 nodes or more, filtering stops after
  ``numFeasibleNodesToFind`` feasible ones (at least 100; ``50 − nodes/125`` per cent,
  no less than 5), starting where the previous pod's search stopped — so the extender
  never sees every node of a large cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

MAX_NODE_SCORE: Final = 100
MAX_EXTENDER_PRIORITY: Final = 10
DEFAULT_MILLI_CPU: Final = 100
"""What a container without a CPU request counts as for LeastAllocated (``pod_resources.go``)."""
DEFAULT_MEMORY_B: Final = 200 * 2**20
"""What a container without a memory request counts as for LeastAllocated."""
MIN_FEASIBLE_NODES: Final = 100
MIN_FEASIBLE_PERCENT: Final = 5

IntArray = npt.NDArray[np.int64]


def non_zero(cpu_m: int, mem_b: int) -> tuple[int, int]:
    """A pod's CPU and memory request as LeastAllocated counts it (one container)."""
    return cpu_m or DEFAULT_MILLI_CPU, mem_b or DEFAULT_MEMORY_B


def least_allocated(requested: Sequence[IntArray], allocatable: Sequence[IntArray]) -> IntArray:
    """NodeResourcesFit's LeastAllocated score per node, resources weighted 1.

    ``requested[r]`` is what each node would have requested of resource ``r`` with the
    pod on it (non-zero defaults applied); a resource a node has none of is left out of
    its average."""
    total = np.zeros(len(allocatable[0]), dtype=np.int64)
    weights = np.zeros_like(total)
    for req, alloc in zip(requested, allocatable, strict=True):
        has = alloc != 0
        # where there is none of a resource, nothing or more than nothing is asked: 0 either way
        total += np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // np.where(has, alloc, 1))
        weights += has
    out: IntArray = np.where(weights > 0, total // np.maximum(weights, 1), 0)
    return out


def balanced_allocation(requested: Sequence[IntArray], allocatable: Sequence[IntArray]) -> IntArray:
    """NodeResourcesBalancedAllocation's score per node over two resources (cpu, memory),
    ``requested`` including the pod, as written (no defaults)."""
    fractions = []
    for req, alloc in zip(requested, allocatable, strict=True):
        safe = np.where(alloc != 0, alloc, 1)
        fractions.append((np.minimum(req / safe, 1.0), alloc != 0))
    (f0, has0), (f1, has1) = fractions
    std = np.where(has0 & has1, np.abs(f0 - f1) / 2, 0.0)
    out: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)  # Go's int64(): truncates
    return out


def with_extender(plugins: IntArray, extender: IntArray, weight: int) -> IntArray:
    """The total kube-scheduler ranks nodes by: its plugins' weighted sum plus the
    extender's 0–10 score × weight × 10."""
    out: IntArray = plugins + extender * weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
    return out


def feasible_to_find(nodes: int, percentage: int = 0) -> int:
    """``numFeasibleNodesToFind``: how many feasible nodes filtering stops at."""
    if nodes < MIN_FEASIBLE_NODES:
        return nodes
    if percentage == 0:
        percentage = max(50 - nodes // 125, MIN_FEASIBLE_PERCENT)
    return max(nodes * percentage // 100, MIN_FEASIBLE_NODES)


class NodeWalk:
    """Which nodes one filtering pass looks at: from where the previous pass stopped, in
    node order, until :func:`feasible_to_find` of them pass (``nextStartNodeIndex``)."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.start = 0

    def take(self, fits: npt.NDArray[np.bool_]) -> IntArray:
        """The feasible nodes this pass finds (indices, in the order looked at), and move
        the start past every node looked at."""
        order = (self.start + np.arange(self.nodes)) % self.nodes
        found = order[fits[order]]
        wanted = feasible_to_find(self.nodes)
        if len(found) > wanted:
            found = found[:wanted]
            looked = int(np.flatnonzero(order == found[-1])[0]) + 1
        else:
            looked = self.nodes
        self.start = (self.start + looked) % self.nodes
        return found


def pick(totals: IntArray, rng: np.random.Generator) -> int:
    """Index of the best total, one of the tied drawn at random (``selectHost``)."""
    tied = np.flatnonzero(totals == totals.max())
    return int(tied[0] if len(tied) == 1 else rng.choice(tied))
