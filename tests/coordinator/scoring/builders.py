"""Small helpers for scoring tests: clusters from literal node tuples, pods, used devices.

A node tuple is ``(cpu_m, mem_b)``, ``(cpu_m, mem_b, gpus)`` or ``(cpu_m, mem_b, gpus,
model)``; nodes are named ``n0``, ``n1`` … in order. :func:`occupy` takes resources from a
node through :meth:`ClusterState.allocate`, so a hand-built state is one the engine could
have reached.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from coordinator.state.podrequest import PodRequest

GIB = 1 << 30


Node = tuple[int, int] | tuple[int, int, int] | tuple[int, int, int, str]


def spec(i: int, node: Node) -> NodeSpec:
    """Node ``n<i>``; a node with GPUs and no model given has model ``V100``."""
    cpu_m, mem_b, *rest = node
    gpus = int(rest[0]) if rest else 0
    model = str(rest[1]) if len(rest) > 1 else ("V100" if gpus else "")
    return NodeSpec(f"n{i}", cpu_m, mem_b, gpus, model)


def cluster(*nodes: Node) -> ClusterState:
    """A cluster from node tuples, all empty."""
    return ClusterState([spec(i, n) for i, n in enumerate(nodes)])


def pod(
    cpu: int = 0,
    mem: int = 0,
    gpus: int = 0,
    milli: int | None = None,
    models: Iterable[str] = (),
    name: str = "p",
    contiguous: int = 0,
) -> PodRequest:
    """A pod; ``milli`` defaults to a whole GPU when GPUs are asked for."""
    if milli is None:
        milli = 1000 if gpus else 0
    return PodRequest(name, cpu, mem, gpus, milli, frozenset(models), contiguous)


def occupy(
    state: ClusterState,
    i: int,
    cpu: int = 0,
    mem: int = 0,
    gpu_used: Sequence[int] = (),
    tags: Iterable[str] = (),
) -> None:
    """Take ``cpu``/``mem`` and ``gpu_used[d]`` milli of device d from node ``i``, and record
    one GPU pod per tag in ``tags``."""
    state.allocate(Placement(i, ()), cpu, mem, 0, None)
    for d, used in enumerate(gpu_used):
        if used:
            state.allocate(Placement(i, (d,)), 0, 0, used, None)
    for tag in tags:
        state.allocate(Placement(i, ()), 0, 0, 0, tag)
