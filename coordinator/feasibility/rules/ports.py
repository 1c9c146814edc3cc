"""NodePorts."""

from __future__ import annotations

from collections.abc import Collection

from coordinator.feasibility.objects import Node, Pod
from coordinator.feasibility.snapshot import Snapshot
from coordinator.feasibility.verdict import FITS, Verdict, refused


def holds_port_of(pod: Pod, other: Pod) -> bool:
    """Whether ``other`` binds a host port that conflicts with one ``pod`` wants."""
    return any(mine.conflicts(theirs) for mine in pod.host_ports for theirs in other.host_ports)


def node_ports(pod: Pod, node: Node, snapshot: Snapshot, gone: Collection[str]) -> Verdict:
    """``nodeports``: no host port the pod wants may be bound on the node by a pod still
    there (``HostPortInfo.CheckConflict``: same protocol and port, same IP or either
    ``0.0.0.0``). Sidecar ports count with the regular containers'."""
    if not pod.host_ports:
        return FITS
    for uid in snapshot.on_node.get(node.name, ()):
        if uid not in gone and holds_port_of(pod, other := snapshot.pods[uid]):
            return refused(
                "NodePorts", f"{other.key} holds a host port the pod wants on {node.name}"
            )
    return FITS
