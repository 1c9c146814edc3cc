"""The colocation annotations: the leader's BE CPU quota and why, the reclaimable batch
CPU, a throttle change written at once whatever its size, all within the 4 KiB budget."""

from __future__ import annotations

import asyncio
from typing import Any

from common import annotations as ann
from coordinator.config import CoordinatorSettings
from coordinator.kube import publisher
from coordinator.kube.leader import Fence
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from tests.coordinator.ingest.test_ingest_colocation import colocated
from tests.hosts import FakeClock

NODE = {
    "metadata": {"name": "node-a"},
    "status": {"allocatable": {"cpu": "224", "memory": "2Ti"}},
}


def rig() -> tuple[LiveCluster, publisher.Publisher, list[dict[str, Any]], FakeClock]:
    clock = FakeClock()
    settings = CoordinatorSettings()
    cluster = LiveCluster(settings, clock, CoordinatorMetrics())
    cluster.upsert_node(NODE)
    leader = asyncio.Event()
    leader.set()
    fence = Fence(1e6, clock.monotonic)
    fence.renewed(clock.monotonic())
    sent: list[dict[str, Any]] = []
    pub = publisher.Publisher(
        cluster,
        lambda name, body: sent.append(body["metadata"]["annotations"]),
        settings.publisher,
        cluster.metrics,
        leader,
        fence,
    )
    return cluster, pub, sent, clock


async def test_quota_reason_and_batch_capacity_are_published() -> None:
    cluster, pub, sent, clock = rig()
    cluster.apply_report(colocated("node-a", 45.0, seq=1))
    await pub.publish_due(clock.wall(), clock.monotonic())
    first = sent[-1]
    assert first[ann.BE_CPU_QUOTA] == "none;at=2026-09-21T14:13:20Z"
    assert first[ann.BE_CPU_QUOTA_REASON] == (
        "no throttle yet: LS cpu some avg10 45.0% >= 30% for 10s"
    )
    assert first[ann.DIRECTIVES].startswith("be_cpu_quota=none;")
    # 221500 allocatable − 100500 LS (and system) − 10 % margin.
    assert first[ann.BATCH_CPU].startswith("reclaimable=98850m;at=")
    clock.advance(10.0)
    cluster.apply_report(colocated("node-a", 47.5, seq=2))
    assert await pub.publish_due(clock.wall(), clock.monotonic()) == 1  # changed: due at once
    second = sent[-1]
    assert second[ann.BE_CPU_QUOTA] == "40000m;at=2026-09-21T14:13:30Z"
    assert second[ann.BE_CPU_QUOTA_REASON] == "tightened: LS cpu some avg10 47.5% >= 30% for 10s"
    assert second[ann.DIRECTIVES].startswith("be_cpu_quota=40000m;")
    assert ann.size_b(second) <= ann.BUDGET_B


async def test_a_small_throttle_change_is_written_at_once() -> None:
    cluster, pub, sent, clock = rig()
    cluster.apply_report(colocated("node-a", 45.0, seq=1))
    await pub.publish_due(clock.wall(), clock.monotonic())
    clock.advance(10.0)
    cluster.apply_report(colocated("node-a", 47.5, seq=2))
    await pub.publish_due(clock.wall(), clock.monotonic())
    # 40000 → 22150 m is 8 % of 224 cores... and the next, smaller steps still go out.
    clock.advance(10.0)
    cluster.apply_report(colocated("node-a", 47.5, seq=3))
    assert await pub.publish_due(clock.wall(), clock.monotonic()) == 1
    assert sent[-1][ann.BE_CPU_QUOTA].startswith("22150m;")
    clock.advance(1.0)
    assert await pub.publish_due(clock.wall(), clock.monotonic()) == 0  # nothing changed


async def test_a_stale_node_shows_released() -> None:
    cluster, pub, sent, clock = rig()
    cluster.apply_report(colocated("node-a", 45.0, seq=1))
    clock.advance(10.0)
    cluster.apply_report(colocated("node-a", 47.5, seq=2))
    await pub.publish_due(clock.wall(), clock.monotonic())
    clock.advance(61.0)
    cluster.expire()
    await pub.publish_due(clock.wall(), clock.monotonic())
    last = sent[-1]
    assert last[ann.BE_CPU_QUOTA].startswith("none;")
    assert last[ann.BE_CPU_QUOTA_REASON] == "no fresh report: released"
    assert last[ann.BATCH_CPU] is None  # removed: not known without a fresh report


def test_a_long_reason_is_cut_to_fit_the_budget() -> None:
    cut = ann.reason("x" * 5000)
    assert len(cut) == ann.MAX_REASON and cut.endswith("…")
    assert ann.reason("short") == "short"
