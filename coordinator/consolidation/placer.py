"""A working copy of the cluster that planned moves are placed into, one pod at a time:
Stowage's state (its filter and the policy's score) and kube-scheduler's (the
feasibility snapshot), each move taking its room before the next is placed, so two
moves never count on the same hole.

The drain planner (:mod:`coordinator.consolidation.drain`) places each drained pod on its
best node; the defragmenter (:mod:`coordinator.consolidation.defrag`) tries the nodes in
turn, backtracking, so a set of moves is found whenever one exists. Both ask only
:meth:`Placer.homes` (where the pod could go, best first) and :meth:`Placer.take` (go
there, if kube-scheduler's filters pass it too), and undo with :meth:`Placer.give_back`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Collection

import numpy as np

from coordinator import feasibility
from coordinator.eviction.view import ClusterView
from coordinator.live.decisions import judge
from coordinator.state.cluster import Placement


class Placer:
    def __init__(self, view: ClusterView, closed: set[str]) -> None:
        self.view = view
        self.state = copy.deepcopy(view.state)
        self.pods = dict(view.snapshot.pods)
        self.snapshot = view.snapshot
        self.closed = closed
        """Nodes no pod may move to."""
        self.received: set[str] = set()

    def lift(self, uids: Collection[str]) -> dict[str, feasibility.Pod]:
        """Take ``uids`` out of kube-scheduler's picture (they are evicted: their ports,
        affinities and spread counts go with them); what was taken, for :meth:`restore`."""
        return {u: self.pods.pop(u) for u in uids if u in self.pods}

    def restore(self, originals: dict[str, feasibility.Pod]) -> None:
        self.pods.update(originals)
        self.snapshot = feasibility.Snapshot(self.snapshot.nodes, self.pods)

    def homes(self, uid: str, also_closed: Collection[str] = ()) -> list[int] | str:
        """The rows of the nodes (not :attr:`closed`, nor ``also_closed``) Stowage's filter
        passes the pod on now, the policy's best first (then by name); or why there is
        none."""
        view, state = self.view, self.state
        request = view.pods[uid].request
        rows = np.array(
            [i for i, n in enumerate(state.names) if n not in self.closed and n not in also_closed],
            dtype=np.int64,
        )
        if not len(rows):
            return "every other node is closed to it"
        found = judge(state, view.policy, request, rows, view.signals)
        passing = rows[~found.refused]
        if not len(passing):
            return f"Stowage's filter refuses it everywhere ({found.reasons[0]})"
        scores = view.policy.score_nodes(state, request, passing)
        order = sorted(
            zip(passing.tolist(), scores.tolist(), strict=True),
            key=lambda p: (-p[1], state.names[p[0]]),
        )
        return [i for i, _ in order]

    def take(self, uid: str, row: int) -> Placement | feasibility.Verdict:
        """Put the pod on node ``row`` if kube-scheduler's filters pass it there, taking
        its room; else the refusing verdict, with nothing taken."""
        view, state = self.view, self.state
        facts = view.pods[uid]
        request = facts.request
        moved = dataclasses.replace(facts.scheduling, node=None, nominated=None)
        self.snapshot = feasibility.Snapshot(self.snapshot.nodes, self.pods)
        name = state.names[row]
        verdict = feasibility.Question(moved, self.snapshot).without(name)
        if not verdict.fits:
            return verdict
        devices = view.policy.devices(state, row, request) if request.gpus else ()
        milli = request.gpu_milli if devices else 0
        placement = Placement(row, devices)
        try:
            state.allocate(placement, request.cpu_m, request.mem_b, milli, request.tag)
        except ValueError as e:  # the filter's room and the devices' disagree: not here
            return feasibility.Verdict(feasibility.Outcome.REFUSED, "", str(e))
        self.pods[uid] = dataclasses.replace(moved, node=name)
        return placement

    def give_back(self, uid: str, placement: Placement) -> None:
        """Undo :meth:`take`."""
        request = self.view.pods[uid].request
        milli = request.gpu_milli if placement.devices else 0
        self.state.release(placement, request.cpu_m, request.mem_b, milli, request.tag)
        del self.pods[uid]

    def place(self, uid: str) -> tuple[str, Placement] | str:
        """The pod on its best node that both filters pass, its room taken; or why there
        is none."""
        rows = self.homes(uid)
        if isinstance(rows, str):
            return rows
        first: feasibility.Verdict | None = None
        for i in rows:
            taken = self.take(uid, i)
            if isinstance(taken, Placement):
                return self.state.names[i], taken
            first = first or taken
        assert first is not None
        rule = f"{first.rule}: " if first.rule else ""
        return (
            "kube-scheduler's filters refuse it on every node Stowage's filter passes"
            f" ({rule}{first.reason})"
        )
