"""The leader marks the patrol's candidates on their Nodes — annotation, Event, metric —
through the real client against the API emulator: fenced, rate-limited, cleared when a
node is no longer a candidate, and leftovers of an earlier term cleared without an Event."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes import client

from common import annotations as ann
from coordinator.config import CoordinatorSettings, EventSettings, PatrolSettings
from coordinator.consolidation import marker
from coordinator.consolidation.patrol import SAMPLE_S, Patrol
from coordinator.kube import publisher
from coordinator.kube.client import api_client
from coordinator.kube.events import EventRecorder
from coordinator.kube.leader import Fence
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from hack.bench.ingest import gpu_node
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import EVENTS, NODES
from tests.coordinator.consolidation.test_patrol import report
from tests.hosts import FakeClock
from tests.kit import eventually

NODES_ = [f"gpu-node-{i:05d}" for i in range(3)]


class Rig:
    def __init__(self, kube: KubeApi, api: Any, **settings: Any) -> None:
        self.kube = kube
        self.api = api
        self.term = False
        self.clock = FakeClock(mono_s=86400.0)
        self.settings = PatrolSettings(**{"max_patches_per_s": 10.0, **settings})
        self.metrics = CoordinatorMetrics()
        self.cluster = LiveCluster(CoordinatorSettings(), self.clock, self.metrics)
        self.cluster.replace_nodes([gpu_node(n) for n in NODES_])
        self.patrol = Patrol(self.cluster, self.settings, self.clock)
        self.fence = Fence(1e9, self.clock.monotonic)
        self.fence.renewed(self.clock.monotonic())
        recorder = EventRecorder(
            client.CoreV1Api(api), self.fence, self.clock, EventSettings(), self.metrics
        )
        self.marker = marker.Marker(
            self.patrol,
            marker.marked_nodes(api),
            publisher.merge_patcher(api),
            recorder,
            self.fence,
            self.settings,
            self.metrics,
            self.clock,
        )

    def hour(self, cpu: dict[str, float]) -> None:
        """An hour of reports at these CPU uses, sampled."""
        for _ in range(int(3600 / SAMPLE_S)):
            for node, pct in cpu.items():
                self.cluster.apply_report(report(node, pct), self.clock.monotonic())
            self.cluster.expire()
            self.patrol.sample()
            self.clock.advance(SAMPLE_S)

    async def mark(self) -> int:
        """One tick of the leader's (the first starts its term)."""
        if not self.term:
            assert await self.marker.start_term()
            self.term = True
        self.clock.advance(10.0)  # a full patch budget
        return await self.marker.mark_due(self.patrol.candidates(), list(self.cluster.specs))

    def annotations(self, node: str) -> dict[str, str]:
        obj = self.kube.store.get(NODES, "", node)
        return dict(obj["metadata"].get("annotations") or {})

    def events(self) -> list[tuple[str, str, str]]:
        items = self.kube.store.list(EVENTS, "default")[0]
        return sorted((e["involvedObject"]["name"], e["reason"], e["message"]) for e in items)

    def marks(self, action: str) -> float:
        return self.metrics.consolidation_marks.labels(action)._value.get()


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        for name in NODES_:
            api.store.create(NODES, gpu_node(name))
        yield api


@pytest.fixture
def make(kube: KubeApi) -> Iterator[Any]:
    with api_client(host=kube.url) as api:
        yield lambda **settings: Rig(kube, api, **settings)


async def test_a_candidate_is_marked_once_and_cleared_when_busy_again(make: Any) -> None:
    rig = make()
    idle, busy, silent = NODES_
    rig.hour({idle: 10.0, busy: 90.0})
    assert await rig.mark() == 1  # the others carry no mark: nothing to write
    value, when = ann.parse(rig.annotations(idle)[ann.CONSOLIDATE])
    assert value == {"window": "1h", "mean": "10.0", "peak": "10.0", "threshold": "70"}
    assert when == ann.timestamp(rig.clock.wall())
    reason = rig.annotations(idle)[ann.CONSOLIDATE_REASON]
    assert reason.startswith("mean utilisation 10.0% (peak 10.0%) over the last 1h, below 70%")
    assert ann.CONSOLIDATE not in rig.annotations(busy)
    assert rig.events() == [(idle, "ConsolidationCandidate", f"consolidation candidate: {reason}")]
    assert await rig.mark() == 0  # told: nothing more is written
    assert rig.marks("marked") == 1

    rig.hour({idle: 95.0, busy: 90.0})
    assert await rig.mark() == 1
    assert ann.CONSOLIDATE not in rig.annotations(idle)
    assert ann.CONSOLIDATE_REASON not in rig.annotations(idle)
    assert [e[:2] for e in rig.events()] == [
        (idle, "ConsolidationCandidate"),
        (idle, "ConsolidationCleared"),
    ]
    assert rig.marks("cleared") == 1
    assert silent not in {e[0] for e in rig.events()}


async def test_a_new_term_clears_a_mark_left_on_a_busy_node_and_keeps_a_due_one(
    make: Any, kube: KubeApi
) -> None:
    rig = make()
    idle, busy, _ = NODES_
    left = {ann.CONSOLIDATE: "window=1h,mean=3.0;at=x", ann.CONSOLIDATE_REASON: "earlier"}
    for node in (idle, busy):

        def leftover(obj: dict[str, Any]) -> dict[str, Any]:
            obj["metadata"]["annotations"] = {**left, "other": "kept"}
            obj["metadata"]["resourceVersion"] = ""
            return obj

        kube.store.update(NODES, "", node, leftover)
    rig.hour({idle: 10.0, busy: 90.0})
    assert await rig.mark() == 1  # the busy node's mark is cleared, the idle one's stands
    assert rig.annotations(busy) == {"other": "kept"}
    assert rig.annotations(idle) == {**left, "other": "kept"}
    assert [e[:2] for e in rig.events()] == [(busy, "ConsolidationCleared")]
    assert await rig.mark() == 0


async def test_a_term_starts_only_once_the_marks_can_be_read(make: Any) -> None:
    rig = make(window="5m")
    five_minutes(rig)
    calls = []

    def refuse() -> dict[str, str]:
        calls.append(1)
        raise OSError("connection refused")

    rig.marker._marked = refuse
    leader = asyncio.Event()
    leader.set()
    async with looping(rig, leader):
        await eventually(lambda: len(calls) >= 2, "a tick after the refusal")
        assert ann.CONSOLIDATE not in rig.annotations(NODES_[0])
        rig.marker._marked = marker.marked_nodes(rig.api)
        await eventually(lambda: ann.CONSOLIDATE in rig.annotations(NODES_[0]), "the mark")


async def test_patches_keep_to_the_budget_marks_first(make: Any) -> None:
    rig = make(max_patches_per_s=1.0)
    rig.hour(dict.fromkeys(NODES_[:2], 5.0))
    assert await rig.mark() == 1
    assert ann.CONSOLIDATE in rig.annotations(NODES_[0])
    assert await rig.mark() == 1
    assert ann.CONSOLIDATE in rig.annotations(NODES_[1])
    assert await rig.mark() == 0


async def test_a_replica_whose_lease_lapsed_writes_nothing(make: Any) -> None:
    rig = make()
    rig.hour({NODES_[0]: 5.0})
    assert await rig.marker.start_term()
    rig.term = True
    rig.fence.revoke()
    assert await rig.mark() == 0
    assert ann.CONSOLIDATE not in rig.annotations(NODES_[0])
    assert rig.events() == []


def five_minutes(rig: Rig) -> None:
    """Five minutes of samples of node 0 at 5 %, taken by hand, and a fresh report."""
    for _ in range(10):
        rig.cluster.apply_report(report(NODES_[0], 5.0), rig.clock.monotonic())
        rig.patrol.sample()
        rig.clock.advance(SAMPLE_S)
    rig.cluster.apply_report(report(NODES_[0], 5.0), rig.clock.monotonic())


@contextlib.asynccontextmanager
async def looping(rig: Rig, leader: asyncio.Event) -> AsyncIterator[None]:
    nodes = lambda: list(rig.cluster.specs)  # noqa: E731
    task = asyncio.create_task(
        marker.run(rig.patrol, rig.marker, nodes, leader, rig.clock, tick_s=0.01)
    )
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_loop_samples_everywhere_and_marks_only_while_leading(make: Any) -> None:
    rig = make(window="5m")
    five_minutes(rig)
    leader = asyncio.Event()
    gauge = rig.metrics.consolidation_candidates.labels("5m")
    async with looping(rig, leader):
        await eventually(lambda: gauge._value.get() == 1, "judged, as a follower too")
        assert ann.CONSOLIDATE not in rig.annotations(NODES_[0])  # which writes nothing
        leader.set()
        await eventually(lambda: ann.CONSOLIDATE in rig.annotations(NODES_[0]), "the mark")
