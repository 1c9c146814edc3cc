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
group's existing node, made cautious for groups whose nodes differ.

A group with no node left (scaled to zero, or not yet grown) has a template only where
the operator declared one (``autoscale.templates``), as the cluster autoscaler needs its
cloud provider's node-template tags to scale a group from zero; without one, no hint can
name it (see ``docs/autoscaling.md``). A declared template carries its own group label
whatever its labels say, so the pods that select the group match it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from coordinator import feasibility
from coordinator.config import GroupTemplate
from coordinator.feasibility.objects import Taint, amounts

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


def groups(
    nodes: Mapping[str, feasibility.Node],
    keys: Sequence[str],
    declared: Mapping[str, GroupTemplate],
) -> list[Group]:
    """Every group with at least one node, and every declared one with none, sorted by
    name; one pass over the nodes."""
    members: dict[tuple[str, str], list[feasibility.Node]] = {}
    for node in nodes.values():
        found = group_of(node, keys)
        if found is not None:
            members.setdefault(found, []).append(node)
    known = [
        Group(key, value, tuple(sorted(n.name for n in ns)), _template(f"{key}:{value}", ns))
        for (key, value), ns in members.items()
    ]
    for name, template in declared.items():
        key, _, value = name.partition(":")
        if (key, value) not in members:
            known.append(Group(key, value, (), _declared(name, key, value, template)))
    return sorted(known, key=lambda g: g.name)


def _declared(name: str, key: str, value: str, declared: GroupTemplate) -> feasibility.Node:
    return feasibility.Node(
        name=f"new node of {name}",
        labels={**declared.labels, key: value},
        taints=tuple(Taint(t.key, t.value, t.effect) for t in declared.taints),
        unschedulable=False,
        allocatable=amounts({r: str(q) for r, q in declared.allocatable.items()}),
    )


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
