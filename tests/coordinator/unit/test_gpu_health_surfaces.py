"""Where an operator sees unhealthy GPUs: the ``stowage.io/gpu-health`` annotations (written
at once on a change, removed once healthy), the node tile of ``/debug/nodes``, ``/ui`` and
``stowage top``, and an Event on the Node each time the set of unhealthy GPUs changes —
from the leader only, through the real recorder and client against the API emulator."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from cli import top
from common import annotations as ann
from common.schema import XidSeen
from coordinator.config import CoordinatorSettings, EventSettings
from coordinator.kube import gpu_health_events, publisher
from coordinator.kube.client import api_client
from coordinator.kube.events import EventRecorder
from coordinator.kube.leader import Fence
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.nodeview import NodeView
from hack.bench.ingest import gpu_node
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import EVENTS
from tests.coordinator.scoring.test_gpuhealth import report
from tests.hosts import FakeClock
from tests.kit import eventually as until

NODE = "gpu-node-00000"
XID_79 = {"xid_recent": [XidSeen(xid=79, age_s=40.0)], "xid_critical": 1, "last_xid": 79}
ECC = {"ecc_uncorrected_volatile": 2}


def rig() -> tuple[LiveCluster, publisher.Publisher, list[dict[str, Any]], FakeClock]:
    clock = FakeClock()
    settings = CoordinatorSettings()
    cluster = LiveCluster(settings, clock, CoordinatorMetrics())
    cluster.upsert_node(gpu_node(NODE))
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


async def test_annotations_name_the_unhealthy_gpus_at_once_and_go_when_healthy() -> None:
    cluster, pub, sent, clock = rig()
    cluster.apply_report(report(NODE, seq=1))
    await pub.publish_due(clock.wall(), clock.monotonic())
    assert ann.GPU_HEALTH not in sent[-1]

    clock.advance(10.0)
    cluster.apply_report(report(NODE, seq=2, gpu3=XID_79, gpu5=ECC))
    assert await pub.publish_due(clock.wall(), clock.monotonic()) == 1  # a change: at once
    sick = sent[-1]
    assert sick[ann.GPU_HEALTH] == "unhealthy=3+5,gpus=8;at=2026-01-01T00:00:00Z"
    assert sick[ann.GPU_HEALTH_REASON] == "GPU 3: XID 79; GPU 5: 2 uncorrectable ECC errors"
    assert ann.size_b(sick) <= ann.BUDGET_B

    clock.advance(10.0)
    older = {**XID_79, "xid_recent": [XidSeen(xid=79, age_s=50.0)]}
    cluster.apply_report(report(NODE, seq=3, gpu3=older, gpu5=ECC))
    assert await pub.publish_due(clock.wall(), clock.monotonic()) == 0  # the same GPUs, same words

    clock.advance(10.0)
    cluster.apply_report(report(NODE, seq=4))  # reset: every condition cleared
    assert await pub.publish_due(clock.wall(), clock.monotonic()) == 1
    assert sent[-1][ann.GPU_HEALTH] is None  # merge patch: removed
    assert sent[-1][ann.GPU_HEALTH_REASON] is None


def test_the_node_tile_and_top_show_the_unhealthy_gpus() -> None:
    cluster, _, _, _ = rig()
    cluster.apply_report(report(NODE, gpu3=XID_79))
    (tile,) = NodeView(cluster).tiles()

    assert (tile["gpu_unhealthy"], tile["gpu_health"]) == (1, "GPU 3: XID 79 40s ago")
    text = top.table([dict(tile)], "name")
    assert text.splitlines()[0].startswith("1 nodes, 0 stale, 0 throttled, 1 with unhealthy GPUs;")
    assert text.splitlines()[2].split()[2] == "8.0/8!"

    cluster.apply_report(report(NODE, seq=1))
    (tile,) = NodeView(cluster).tiles()
    assert (tile["gpu_unhealthy"], tile["gpu_health"]) == (0, None)
    assert "!" not in top.table([dict(tile)], "name")


def test_the_watch_tells_changes_of_which_gpus_only() -> None:
    cluster, _, _, clock = rig()
    watch = gpu_health_events.GpuHealthWatch()
    cluster.apply_report(report(NODE, seq=1, gpu3=XID_79))
    (first,) = watch.changes(cluster)
    assert (first.type, first.reason, first.message) == (
        "Warning",
        "GpuUnhealthy",
        "1 of 8 GPUs not offered to new GPU pods: GPU 3: XID 79",
    )
    assert watch.changes(cluster) == []  # nothing new

    clock.advance(100.0)  # the agent falls silent: not healthy, just unknown
    assert cluster.expire() == [NODE]
    assert watch.changes(cluster) == []

    cluster.apply_report(report(NODE, seq=2, gpu3=XID_79, gpu4=ECC))
    (second,) = watch.changes(cluster)
    assert second.message.startswith("2 of 8 GPUs not offered")

    cluster.apply_report(report(NODE, seq=3))
    (third,) = watch.changes(cluster)
    assert (third.type, third.reason) == ("Normal", "GpuHealthy")
    assert watch.changes(cluster) == []


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        yield api


@pytest.fixture
def recorder(kube: KubeApi) -> Iterator[EventRecorder]:
    clock = FakeClock()
    fence = Fence(10.0, clock.monotonic)
    fence.renewed(clock.monotonic())
    with api_client(host=kube.url) as api:
        yield EventRecorder(
            client.CoreV1Api(api), fence, clock, EventSettings(), CoordinatorMetrics()
        )


async def test_the_leader_writes_the_event_on_the_node(
    kube: KubeApi, recorder: EventRecorder
) -> None:
    cluster, _, _, _ = rig()
    cluster.apply_report(report(NODE, gpu2={"remapping_failed": True}))
    leader = asyncio.Event()
    leader.set()
    task = asyncio.create_task(
        gpu_health_events.write_events(cluster, recorder, leader, period_s=0.01)
    )
    try:
        await until(lambda: len(kube.store.list(EVENTS, "default")[0]) == 1)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    (event,) = kube.store.list(EVENTS, "default")[0]
    assert (event["type"], event["reason"], event["involvedObject"]["name"]) == (
        "Warning",
        "GpuUnhealthy",
        NODE,
    )
    assert (
        event["message"] == "1 of 8 GPUs not offered to new GPU pods: GPU 2: row remapping failed"
    )
