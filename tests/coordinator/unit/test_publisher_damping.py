from __future__ import annotations

import asyncio
import dataclasses

from common import annotations as ann
from common.schema import SCHEMA_VERSION, Absent, MemfragSection, NodeContiguity, NodeReport
from coordinator.config import CoordinatorSettings, PublisherSettings
from coordinator.kube import publisher
from coordinator.kube.leader import Fence
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from tests.hosts import FakeClock

GIB = 2**30


def node(name: str) -> dict:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "nvidia.com/gpu": "4"}},
    }


def report(name: str, at: float, contiguous_b: int) -> NodeReport:
    memfrag = MemfragSection(
        measured_at=at, page_size_b=4096, order_2mib=9, order_1gib=18, zones=[],
        nodes=[NodeContiguity(node=0, free_b=contiguous_b, free_b_ge_2mib=contiguous_b,
                              free_b_ge_1gib=0, largest_block_b=4 * 2**20, unusable_2mib_frac=0.0)],
        hugepages=Absent("x"), thp_enabled=None, thp_defrag=None, compaction=Absent("x"),
    )  # fmt: skip
    absent = Absent("not-measured")
    return NodeReport(
        schema_version=SCHEMA_VERSION, node=name, agent_version="t", seq=1, measured_at=at,
        psi=absent, memfrag=memfrag, allocatable=absent, numa=absent, gpus=absent,
        usage=absent, pods=absent,
    )  # fmt: skip


def setup(**publisher_settings):
    clock = FakeClock()
    settings = CoordinatorSettings()
    settings = dataclasses.replace(settings, publisher=PublisherSettings(**publisher_settings))
    cluster = LiveCluster(settings, clock, CoordinatorMetrics())
    for name in ("a", "b"):
        cluster.upsert_node(node(name))
    patches: list[tuple[str, dict]] = []
    leader = asyncio.Event()
    leader.set()
    # These tests are about damping: the lease, renewed now, stays held for their span.
    fence = Fence(renew_deadline_s=1e6, monotonic=clock.monotonic)
    fence.renewed(clock.monotonic())
    pub = publisher.Publisher(
        cluster, lambda n, body: patches.append((n, body)), settings.publisher,
        cluster.metrics, leader, fence,
    )  # fmt: skip
    return clock, cluster, pub, patches


async def test_publishes_once_per_meaningful_change():
    clock, cluster, pub, patches = setup(heartbeat_s=300, change_pct=5)
    await pub.publish_due(clock.wall(), clock.monotonic())
    assert sorted(n for n, _ in patches) == ["a", "b"]  # first time: every node
    patches.clear()
    cluster.apply_report(report("a", clock.wall(), 10 * GIB))
    await pub.publish_due(clock.wall(), clock.monotonic())
    assert [n for n, _ in patches] == ["a"]  # stale -> fresh, contiguity appears
    values = patches[0][1]["metadata"]["annotations"]
    assert values[ann.CONTIGUITY].startswith("free_2mib=10.00Gi;at=")
    assert values[ann.STATE].startswith("fresh;at=")
    patches.clear()
    # The same value again, and a change of 1 GiB of 64 GiB (1.6 points): no patch.
    for contiguous in (10 * GIB, 11 * GIB):
        clock.advance(1)
        cluster.apply_report(report("a", clock.wall(), contiguous))
        await pub.publish_due(clock.wall(), clock.monotonic())
    assert patches == []
    # 6 GiB down (9.4 points): one patch, then quiet again.
    clock.advance(1)
    cluster.apply_report(report("a", clock.wall(), 5 * GIB))
    await pub.publish_due(clock.wall(), clock.monotonic())
    await pub.publish_due(clock.wall(), clock.monotonic())
    assert len(patches) == 1
    assert patches[0][1]["metadata"]["annotations"][ann.CONTIGUITY].startswith("free_2mib=5.00Gi")


async def test_heartbeat_and_staleness():
    clock, cluster, pub, patches = setup(heartbeat_s=60, change_pct=5)
    cluster.apply_report(report("a", clock.wall(), 10 * GIB))
    await pub.publish_due(clock.wall(), clock.monotonic())
    patches.clear()
    clock.advance(61)  # past the heartbeat; and the report (ttl 60 s) is now stale
    cluster.expire()
    await pub.publish_due(clock.wall(), clock.monotonic())
    body = dict(patches)["a"]["metadata"]["annotations"]
    assert body[ann.STATE].startswith("stale: no report since ")
    assert body[ann.CONTIGUITY] is None and body[ann.PRESSURE] is None  # merge-patch deletes
    assert "b" in dict(patches)  # the heartbeat re-writes unchanged nodes too


async def test_rate_limit_and_followers_do_not_publish():
    clock, cluster, pub, patches = setup(max_patches_per_s=1)
    await pub.publish_due(clock.wall(), clock.monotonic())
    assert len(patches) == 1  # one token: one node now, the other on a later tick
    pub._leader.clear()
    clock.advance(10)
    await pub.publish_due(clock.wall(), clock.monotonic())
    assert len(patches) == 1


def test_annotation_values_parse_back_and_fit_the_budget():
    text = ann.value({"cpu": "45.2", "memory": "61.0"}, 1_790_000_000)
    pairs, at = ann.parse(text)
    assert pairs == {"cpu": "45.2", "memory": "61.0"} and at == "2026-09-21T14:13:20Z"
    big = {k: ann.value({"x": "1" * 100}, 0) for k in ann.KEYS}
    assert ann.size_b(big) < ann.BUDGET_B
