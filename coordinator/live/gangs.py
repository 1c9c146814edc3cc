"""The live cluster's gangs: which pods belong to each, where their members landed, and
the topology domains of the nodes — what :mod:`coordinator.scoring.ganglocality` scores a
member's nodes by.

A member has *landed* where it holds room: bound (the pod watch), assumed on the node an
earlier answer ranked first (kube-scheduler's, and Volcano's while answering Volcano), or
pending with kube-scheduler's ``status.nominatedNodeName`` on a known node (its
preemption freed room there). The pod asked about is never one of its own gang's landed
members.

The members are indexed by gang as the pod watch delivers them, so a call looks only at
its own gang's members (at most :data:`~coordinator.scoring.ganglocality.MAX_MEMBERS_COUNTED`);
the nodes' domains are worked out once and again only after a node's labels change or
the nodes do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import islice

import numpy as np

from coordinator import feasibility
from coordinator.live.holdings import Holdings
from coordinator.scoring import ganglocality
from coordinator.state.cluster import ClusterState
from coordinator.state.podfacts import PodFacts
from coordinator.state.podgroups import PodGroups
from coordinator.state.podrequest import PodRequest


class Gangs:
    """Pods by gang, and the nodes' topology domains for ``topology_keys``."""

    def __init__(self, topology_keys: Sequence[str]) -> None:
        self.topology_keys = tuple(topology_keys)
        self._members: dict[str, dict[str, None]] = {}
        """Gang → its pods' uids (a dict as an ordered set; no empty gangs)."""
        self._gang_of: dict[str, str] = {}
        """Pod uid → its gang, for the pods in :attr:`_members`."""
        self._domains: ganglocality.Domains | None = None
        self._domains_of: ClusterState | None = None
        """The state :attr:`_domains` are of."""

    def note(self, uid: str, gang: str | None) -> None:
        """Pod ``uid`` is (now) in ``gang`` (None: in none)."""
        if self._gang_of.get(uid) == gang:
            return
        self.drop(uid)
        if gang is not None:
            self._gang_of[uid] = gang
            self._members.setdefault(gang, {})[uid] = None

    def drop(self, uid: str) -> None:
        """Pod ``uid`` is gone."""
        gang = self._gang_of.pop(uid, None)
        if gang is None:
            return
        members = self._members[gang]
        members.pop(uid, None)
        if not members:
            del self._members[gang]

    def retain(self, uids: Collection[str]) -> None:
        """A full relist: only pods among ``uids`` stay."""
        for uid in [u for u in self._gang_of if u not in uids]:
            self.drop(uid)

    def nodes_changed(self) -> None:
        """The nodes or their labels changed: the domains are worked out again when next
        asked for."""
        self._domains = None

    def domains(
        self, state: ClusterState, nodes: Mapping[str, feasibility.Node]
    ) -> ganglocality.Domains:
        """The domains of ``state``'s rows, from the labels of each of ``nodes`` (worked
        out again for a new state, or after :meth:`nodes_changed`)."""
        if self._domains is None or self._domains_of is not state:
            rows = [node.labels if (node := nodes.get(name)) else {} for name in state.names]
            self._domains = ganglocality.domains_of(rows, self.topology_keys)
            self._domains_of = state
        return self._domains

    def gang(
        self,
        pod: PodRequest,
        state: ClusterState,
        facts: Mapping[str, PodFacts],
        holdings: Iterable[Holdings],
        podgroups: PodGroups,
    ) -> ganglocality.Gang | None:
        """``pod``'s gang as its scoring sees it, None for a pod in no gang: its members
        other than ``pod`` that hold room (in ``holdings``, or nominated), and its size."""
        if pod.gang is None:
            return None
        holdings = tuple(holdings)
        landed: list[int] = []
        uids = islice(self._members.get(pod.gang, ()), ganglocality.MAX_MEMBERS_COUNTED)
        for uid in uids:
            member = facts.get(uid)
            if member is None or member.key == pod.name:
                continue
            node = next((h.held[uid].node for h in holdings if uid in h.held), None)
            if node is None and member.node is None:
                node = member.scheduling.nominated
            row = state.index.get(node) if node is not None else None
            if row is not None:
                landed.append(row)
        size = podgroups.min_member(pod.gang) or pod.gang_size or 0
        return ganglocality.Gang(pod.gang, size, np.array(landed, dtype=np.int64))
