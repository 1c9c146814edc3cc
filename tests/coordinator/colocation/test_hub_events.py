"""Throttle changes become Events on the Node — from the leader only — through the real
recorder and client against the API emulator."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest
from kubernetes import client

from coordinator.colocation.controller import Change, Throttle
from coordinator.colocation.hub import Colocation
from coordinator.config import ColocationSettings, EventSettings
from coordinator.kube.client import api_client
from coordinator.kube.colocation_events import write_events
from coordinator.kube.events import EventRecorder
from coordinator.kube.leader import Fence
from coordinator.metrics import CoordinatorMetrics
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import EVENTS
from tests.hosts import FakeClock
from tests.kit import eventually as until

NAMESPACE = "stowage-system"


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        api.add_namespace(NAMESPACE)
        yield api


@pytest.fixture
def recorder(kube: KubeApi) -> Iterator[EventRecorder]:
    clock = FakeClock()
    fence = Fence(10.0, clock.monotonic)
    fence.renewed(clock.monotonic())
    with api_client(host=kube.url) as api:
        yield EventRecorder(
            client.CoreV1Api(api),
            fence,
            clock,
            EventSettings(),
            CoordinatorMetrics(),
        )


def change(quota_m: int | None, kind: Change, reason: str) -> Throttle:
    return Throttle(quota_m=quota_m, reason=reason, changed_at=1.0, change=kind)


async def test_each_change_is_an_event_on_its_node(kube: KubeApi, recorder: EventRecorder) -> None:
    hub = Colocation(ColocationSettings(), CoordinatorMetrics())
    leader = asyncio.Event()
    leader.set()
    hub.pending.append(("w1", change(4000, Change.TIGHTENED, "tightened: LS stall 40% >= 30%")))
    hub.pending.append(("w1", change(None, Change.RELEASED, "no fresh report: released")))
    task = asyncio.create_task(write_events(hub, recorder, leader, period_s=0.01))
    try:
        await until(lambda: len(kube.store.list(EVENTS, "default")[0]) == 2)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    found = sorted(
        (
            e["type"],
            e["reason"],
            e["message"],
            e["involvedObject"]["kind"],
            e["involvedObject"]["name"],
        )
        for e in kube.store.list(EVENTS, "default")[0]
    )
    assert found == [
        (
            "Normal",
            "BestEffortReleased",
            "best-effort CPU quota none: no fresh report: released",
            "Node",
            "w1",
        ),
        (
            "Warning",
            "BestEffortThrottled",
            "best-effort CPU quota 4000m: tightened: LS stall 40% >= 30%",
            "Node",
            "w1",
        ),
    ]


async def test_a_follower_writes_no_event_and_drops_its_changes(
    kube: KubeApi, recorder: EventRecorder
) -> None:
    hub = Colocation(ColocationSettings(), CoordinatorMetrics())
    leader = asyncio.Event()
    hub.pending.append(("w1", change(4000, Change.TIGHTENED, "tightened")))
    task = asyncio.create_task(write_events(hub, recorder, leader, period_s=0.01))
    try:
        await until(lambda: not hub.pending)
        # Taking over later: the follower-time change is not told as if it were new.
        leader.set()
        hub.pending.append(("w2", change(3000, Change.TIGHTENED, "tightened")))
        await until(lambda: len(kube.store.list(EVENTS, "default")[0]) == 1)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    [event] = kube.store.list(EVENTS, "default")[0]
    assert event["involvedObject"]["name"] == "w2"
