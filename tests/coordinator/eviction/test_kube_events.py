"""The Event recorder through the real ``kubernetes`` client against the API emulator: what
an Event looks like, where it goes, the fence, the rate limits, duplicates, secrets, and a
failing API server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from coordinator.config import EventSettings
from coordinator.kube.client import api_client
from coordinator.kube.events import (
    MAX_MESSAGE,
    MAX_TRACKED,
    EventRecorder,
    EventType,
    ObjectRef,
    Recorded,
    scrub,
)
from coordinator.kube.leader import Fence
from coordinator.metrics import CoordinatorMetrics
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import EVENTS
from tests.hosts import FakeClock

NAMESPACE = "stowage-system"
NODE = ObjectRef.node("worker-1", uid="node-uid-1")


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        api.add_namespace(NAMESPACE)
        yield api


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fence(clock: FakeClock) -> Fence:
    fence = Fence(10.0, clock.monotonic)
    fence.renewed(clock.monotonic())
    return fence


@pytest.fixture
def metrics() -> CoordinatorMetrics:
    return CoordinatorMetrics()


@pytest.fixture
def core(kube: KubeApi) -> Iterator[Any]:
    with api_client(host=kube.url) as api:
        yield client.CoreV1Api(api)


def recorder(
    core: Any,
    fence: Fence,
    clock: FakeClock,
    metrics: CoordinatorMetrics,
    **settings: Any,
) -> EventRecorder:
    return EventRecorder(
        core,
        fence,
        clock,
        EventSettings(**settings),
        metrics,
        instance="coordinator-0",
    )


def events(kube: KubeApi, namespace: str | None = None) -> list[dict[str, Any]]:
    return kube.store.list(EVENTS, namespace)[0]


def counted(metrics: CoordinatorMetrics, result: str) -> float:
    value = metrics.registry.get_sample_value("stowage_events_total", {"result": result})
    return value or 0.0


def test_a_node_event_is_written_in_the_default_namespace(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    rec = recorder(core, fence, clock, metrics)
    result = rec.record(NODE, EventType.WARNING, "BestEffortThrottled", "BE quota 2000m")
    assert result is Recorded.SENT
    [event] = events(kube)
    # The real API server refuses a Node's Event in any namespace but default.
    assert event["metadata"]["namespace"] == "default"
    assert event["metadata"]["name"].startswith("worker-1.")
    assert event["involvedObject"] == {
        "kind": "Node",
        "name": "worker-1",
        "uid": "node-uid-1",
        "apiVersion": "v1",
    }
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning",
        "BestEffortThrottled",
        "BE quota 2000m",
    )
    assert event["count"] == 1
    assert event["source"] == {"component": "stowage-coordinator"}
    assert event["reportingComponent"] == "stowage-coordinator"
    assert event["reportingInstance"] == "coordinator-0"
    assert event["firstTimestamp"] == "2026-09-21T14:13:20+00:00"  # 1_790_000_000 (FakeClock)
    assert counted(metrics, "sent") == 1


def test_a_pod_event_goes_to_the_pods_namespace(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    kube.add_namespace("ml")
    pod = ObjectRef(kind="Pod", name="train-0", namespace="ml", uid="pod-uid")
    assert recorder(core, fence, clock, metrics).record(pod, "Normal", "Evicting", "m") == (
        Recorded.SENT
    )
    assert events(kube, NAMESPACE) == []
    [event] = events(kube, "ml")
    assert event["involvedObject"]["namespace"] == "ml"


def test_nothing_is_written_without_the_lease(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    rec = recorder(core, fence, clock, metrics, per_object_burst=1, burst=1)
    clock.advance(10.0)  # the renew deadline passed without a renewal
    assert rec.record(NODE, "Normal", "BestEffortReleased", "m") is Recorded.NOT_LEADER
    fence.revoke()
    assert rec.record(NODE, "Normal", "BestEffortReleased", "m") is Recorded.NOT_LEADER
    assert events(kube) == []
    assert counted(metrics, "not_leader") == 2
    # Leading again: what was refused spent none of the budgets, nor counts as sent.
    fence.renewed(clock.monotonic())
    assert rec.record(NODE, "Normal", "BestEffortReleased", "m") is Recorded.SENT


def test_the_fence_is_checked_again_right_before_the_write(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    class LapsingApi:
        """The lease lapses between the recorder's admission and its API call."""

        def create_namespaced_event(self, *args: Any, **kwargs: Any) -> None:
            raise AssertionError("written without the lease")

    class LapsingFence(Fence):
        checks = 0

        def is_held(self, now_mono: float | None = None) -> bool:
            self.checks += 1
            return self.checks == 1

    lapsing = LapsingFence(10.0, clock.monotonic)
    rec = recorder(LapsingApi(), lapsing, clock, metrics)
    assert rec.record(NODE, "Normal", "BestEffortReleased", "m") is Recorded.NOT_LEADER


def test_the_same_message_on_the_same_object_is_written_once_within_dedupe(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    rec = recorder(core, fence, clock, metrics, dedupe_s=600.0)
    assert rec.record(NODE, "Warning", "BestEffortThrottled", "2000m") is Recorded.SENT
    clock.advance(599.0)
    fence.renewed(clock.monotonic())
    assert rec.record(NODE, "Warning", "BestEffortThrottled", "2000m") is Recorded.DUPLICATE
    assert rec.record(NODE, "Warning", "BestEffortThrottled", "1000m") is Recorded.SENT
    other = ObjectRef.node("worker-2")
    assert rec.record(other, "Warning", "BestEffortThrottled", "2000m") is Recorded.SENT
    clock.advance(2.0)
    fence.renewed(clock.monotonic())
    assert rec.record(NODE, "Warning", "BestEffortThrottled", "2000m") is Recorded.SENT
    assert len(events(kube)) == 4
    assert counted(metrics, "duplicate") == 1


def test_one_object_cannot_take_the_whole_budget(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    rec = recorder(core, fence, clock, metrics, per_object_burst=3, per_object_refill_s=30.0)
    results = [rec.record(NODE, "Warning", "BestEffortThrottled", f"{q}m") for q in range(5)]
    assert results == [Recorded.SENT] * 3 + [Recorded.RATE_LIMITED] * 2
    other = ObjectRef.node("worker-2")
    assert rec.record(other, "Warning", "BestEffortThrottled", "1m") is Recorded.SENT
    clock.advance(30.0)
    fence.renewed(clock.monotonic())
    assert rec.record(NODE, "Warning", "BestEffortThrottled", "9m") is Recorded.SENT
    assert rec.record(NODE, "Warning", "BestEffortThrottled", "10m") is Recorded.RATE_LIMITED
    assert len(events(kube)) == 5
    assert counted(metrics, "rate_limited") == 3


def test_the_cluster_wide_budget_holds_across_objects(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    rec = recorder(core, fence, clock, metrics, max_per_s=2.0, burst=4)
    results = [
        rec.record(ObjectRef.node(f"worker-{i}"), "Normal", "BestEffortReleased", "m")
        for i in range(6)
    ]
    assert results == [Recorded.SENT] * 4 + [Recorded.RATE_LIMITED] * 2
    clock.advance(1.0)  # two more tokens
    results = [
        rec.record(ObjectRef.node(f"worker-{i}"), "Normal", "BestEffortReleased", "m")
        for i in range(6, 9)
    ]
    assert results == [Recorded.SENT] * 2 + [Recorded.RATE_LIMITED]
    assert len(events(kube)) == 6


def test_a_refused_event_spends_no_per_object_token(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    # The cluster-wide budget turned it away; the node's own budget is still whole.
    rec = recorder(
        core,
        fence,
        clock,
        metrics,
        max_per_s=0.001,
        burst=1,
        per_object_burst=1,
        per_object_refill_s=1e6,
    )
    assert rec.record(ObjectRef.node("a"), "Normal", "BestEffortReleased", "m") is Recorded.SENT
    assert rec.record(NODE, "Normal", "BestEffortReleased", "m") is Recorded.RATE_LIMITED
    clock.advance(1000.0)
    fence.renewed(clock.monotonic())
    assert rec.record(NODE, "Normal", "BestEffortReleased", "m") is Recorded.SENT


def test_secrets_never_leave_the_process(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl"
    message = f"agent said Authorization: Bearer abc.def-123; token={jwt} password=hunter2 ok"
    recorder(core, fence, clock, metrics).record(NODE, "Warning", "AgentRefused", message)
    [event] = events(kube)
    assert event["message"] == (
        "agent said Authorization: Bearer [redacted]; token=[redacted] password=[redacted] ok"
    )
    assert scrub(f"bare {jwt} here") == "bare [redacted] here"


def test_long_messages_are_cut(
    kube: KubeApi, core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    recorder(core, fence, clock, metrics).record(NODE, "Normal", "BestEffortReleased", "x" * 5000)
    [event] = events(kube)
    assert len(event["message"]) == MAX_MESSAGE == 1024
    assert event["message"].endswith("…")


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("Error", "BestEffortThrottled"), ("Normal", "not camel"), ("Normal", "A" * 129)],
)
def test_a_bad_type_or_reason_is_a_programming_error(
    core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics, kind: str, reason: str
) -> None:
    with pytest.raises(ValueError):
        recorder(core, fence, clock, metrics).record(NODE, kind, reason, "m")


def test_a_failing_api_server_is_counted_and_logged_once(
    kube: KubeApi,
    core: Any,
    fence: Fence,
    clock: FakeClock,
    metrics: CoordinatorMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = recorder(core, fence, clock, metrics)
    missing = ObjectRef(kind="Pod", name="p", namespace="nowhere")
    first = rec.record(missing, "Normal", "Evicting", "one")
    second = rec.record(missing, "Normal", "Evicting", "two")
    assert (first, second) == (Recorded.FAILED, Recorded.FAILED)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "event Evicting on pod p: HTTP 404" in warnings[0].getMessage()
    assert counted(metrics, "failed") == 2
    assert rec.record(NODE, "Normal", "Evicting", "ok") is Recorded.SENT


def test_memory_for_rate_limits_is_bounded(
    core: Any, fence: Fence, clock: FakeClock, metrics: CoordinatorMetrics
) -> None:
    class NoApi:
        def create_namespaced_event(self, *args: Any, **kwargs: Any) -> None:
            return None

    rec = recorder(NoApi(), fence, clock, metrics, max_per_s=1e9, burst=10**9)
    for i in range(MAX_TRACKED + 50):
        rec.record(ObjectRef.node(f"made-up-{i}"), "Normal", "BestEffortReleased", "m")
    assert len(rec._per_object) == MAX_TRACKED
    assert len(rec._last_sent) == MAX_TRACKED
