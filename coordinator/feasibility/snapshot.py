"""The cluster the feasibility model judges against: nodes and bound pods, frozen.

A :class:`Snapshot` is built once (from the watches, or by a test or the simulator) and
never changed; "if pods V were gone" is asked of it, never done to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from coordinator.feasibility.objects import Node, Pod


@dataclass(frozen=True)
class Snapshot:
    nodes: Mapping[str, Node]
    pods: Mapping[str, Pod]
    """Uid → pod, for the pods bound to a node (``spec.nodeName`` set)."""
    on_node: Mapping[str, tuple[str, ...]] = field(init=False)
    """Node → uids of the pods bound there, sorted."""
    anti: tuple[str, ...] = field(init=False)
    """Uids of the bound pods with required anti-affinity terms (they may keep a pod
    off every node of their domains)."""
    requested: dict[str, dict[str, int]] = field(
        init=False, default_factory=dict, compare=False, repr=False
    )
    """Node → what its bound pods request together (``NodeInfo.Requested``), filled in as
    questions ask (:mod:`coordinator.feasibility.model`): the same for every pod asked
    about, so worked out once per snapshot."""

    def __post_init__(self) -> None:
        on_node: dict[str, list[str]] = {}
        for uid, pod in self.pods.items():
            if pod.node is not None:
                on_node.setdefault(pod.node, []).append(uid)
        object.__setattr__(self, "on_node", {n: tuple(sorted(u)) for n, u in on_node.items()})
        object.__setattr__(
            self, "anti", tuple(sorted(u for u, p in self.pods.items() if p.anti_affinity))
        )
