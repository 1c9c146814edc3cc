"""The node groups a cluster autoscaler grows, read from the labels it puts on their nodes.

A node's group is the first of ``autoscale.group_labels`` it carries, with its value
(``karpenter.sh/nodepool=gpu-a100``); a node with none is in no group an autoscaler is
known to grow, and no hint names it. Labels on Nodes are written by the kubelet and
the autoscaler (operators' objects), never by the pods scheduled there.

A group's **template** is what a node added to it would look like to kube-scheduler's
filters: the labels every node of the group carries with the same value (a node's own
name, ``kubernetes.io/hostname``, never), the taints all of them have, not cordoned,
and, per resource, the least allocatable of its nodes: a new node has at least that.
This is what the cluster autoscaler itself does when it builds a template from a
group's existing node, made cautious for groups whose nodes differ. A group with no
node left has no template here, and no hint can name it (see ``docs/autoscaling.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from coordinator import feasibility

HOSTNAME: Final = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class Group:
    key: str
    """The label naming it (``karpenter.sh/nodepool``)."""
    value: str
    nodes: tuple[str, ...]
    """Its nodes' names, sorted."""
    template: feasibility.Node

    @property
    def name(self) -> str:
        """How hints name it: ``karpenter.sh/nodepool:gpu-a100``."""
        return f"{self.key}:{self.value}"


def group_of(node: feasibility.Node, keys: Sequence[str]) -> tuple[str, str] | None:
    """The (label, value) naming ``node``'s group, or None when it carries none of ``keys``."""
    return next(((k, node.labels[k]) for k in keys if node.labels.get(k)), None)


def groups(nodes: Mapping[str, feasibility.Node], keys: Sequence[str]) -> list[Group]:
    """Every group with at least one node, sorted by name; one pass over the nodes."""
    members: dict[tuple[str, str], list[feasibility.Node]] = {}
    for node in nodes.values():
        found = group_of(node, keys)
        if found is not None:
            members.setdefault(found, []).append(node)
    return [
        Group(key, value, tuple(sorted(n.name for n in ns)), _template(f"{key}:{value}", ns))
        for (key, value), ns in sorted(members.items())
    ]


def _template(name: str, nodes: Sequence[feasibility.Node]) -> feasibility.Node:
    first, rest = nodes[0], nodes[1:]
    labels = {
        k: v
        for k, v in first.labels.items()
        if k != HOSTNAME and all(n.labels.get(k) == v for n in rest)
    }
    taints = tuple(t for t in first.taints if all(t in n.taints for n in rest))
    allocatable = {
        r: min(n.allocatable.get(r, 0) for n in nodes)
        for r in sorted({r for n in nodes for r in n.allocatable})
    }
    return feasibility.Node(
        name=f"new node of {name}",
        labels=labels,
        taints=taints,
        unschedulable=False,
        allocatable={r: a for r, a in allocatable.items() if a},
    )
