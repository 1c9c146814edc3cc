"""Pods the extender assumes: bounded per node and cluster-wide (the oldest goes), released
when ``assumed_ttl_s`` passes on the coordinator's monotonic clock. And the Node watch's
bad objects: skipped, never breaking what comes after."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from coordinator.config import CoordinatorSettings, KubeSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.state.podrequest import PodRequest
from tests.coordinator.extender.kubejson import node, pod
from tests.hosts import FakeClock
from tests.kit import build_report

TTL_S = 30.0
CPU_M = 1000


def made_up(k: int) -> PodRequest:
    return PodRequest(name=f"ns/p{k}", cpu_m=CPU_M, mem_b=2**30)


def cluster_of(clock: FakeClock, per_node: int = 64, total: int = 4096) -> LiveCluster:
    kube = KubeSettings(assumed_ttl_s=TTL_S, max_assumed_per_node=per_node, max_assumed=total)
    cluster = LiveCluster(CoordinatorSettings(kube=kube), clock, CoordinatorMetrics())
    cluster.replace_nodes([node("node-a", "64", "256Gi"), node("node-b", "64", "256Gi")])
    return cluster


def bound(name: str, uid: str, node_name: str) -> dict[str, Any]:
    """A pod the API server says runs on ``node_name``."""
    obj = pod(name=name, uid=uid)
    obj["spec"]["nodeName"] = node_name
    obj["status"]["phase"] = "Running"
    return obj


def cpu_free(cluster: LiveCluster, name: str) -> int:
    state = cluster.state
    assert state is not None
    return int(state.cpu_free[state.index[name]])


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_an_assumed_pod_is_released_when_its_ttl_has_passed(clock: FakeClock) -> None:
    cluster = cluster_of(clock)
    cluster.assume("uid-1", made_up(1), "node-a")
    assert cpu_free(cluster, "node-a") == 64_000 - CPU_M

    clock.advance(TTL_S - 0.001)
    cluster.expire()
    assert "uid-1" in cluster.held
    clock.advance(0.001)  # exactly the deadline
    cluster.expire()
    assert cluster.held == {}
    assert cpu_free(cluster, "node-a") == 64_000
    assert cluster.holdings.assumed_count == 0


def test_assumptions_lapse_oldest_first_and_only_those_due(clock: FakeClock) -> None:
    cluster = cluster_of(clock)
    cluster.assume("uid-1", made_up(1), "node-a")
    clock.advance(10)
    cluster.assume("uid-2", made_up(2), "node-b")
    clock.advance(10)
    cluster.assume("uid-1", made_up(1), "node-b")  # ranked again: a new deadline
    clock.advance(TTL_S - 10)  # uid-2's deadline; uid-1's is 10 s later
    cluster.expire()
    assert set(cluster.held) == {"uid-1"}
    clock.advance(9)
    cluster.expire()
    assert set(cluster.held) == {"uid-1"}
    clock.advance(1)
    cluster.expire()
    assert cluster.held == {}


def test_a_node_holds_at_most_max_assumed_per_node_the_oldest_going(clock: FakeClock) -> None:
    cluster = cluster_of(clock, per_node=2)
    for k in range(3):
        cluster.assume(f"uid-{k}", made_up(k), "node-a")
    cluster.assume("uid-b", made_up(9), "node-b")

    assert sorted(cluster.held) == ["uid-1", "uid-2", "uid-b"]
    assert cluster.holdings.assumed_on("node-a") == 2
    assert cpu_free(cluster, "node-a") == 64_000 - 2 * CPU_M


def test_the_cluster_holds_at_most_max_assumed_the_oldest_anywhere_going(
    clock: FakeClock,
) -> None:
    cluster = cluster_of(clock, total=3)
    for k, name in enumerate(["node-a", "node-b", "node-a", "node-b"]):
        cluster.assume(f"uid-{k}", made_up(k), name)

    assert sorted(cluster.held) == ["uid-1", "uid-2", "uid-3"]
    assert cluster.holdings.assumed_count == 3
    assert cpu_free(cluster, "node-a") == 64_000 - CPU_M
    assert cpu_free(cluster, "node-b") == 64_000 - 2 * CPU_M


def test_a_stream_of_made_up_pods_cannot_keep_a_node_full(clock: FakeClock) -> None:
    cluster = cluster_of(clock, per_node=4)
    for k in range(2000):
        cluster.assume(f"uid-{k}", made_up(k), "node-a")
    assert cpu_free(cluster, "node-a") == 64_000 - 4 * CPU_M
    assert len(cluster.held) == 4

    clock.advance(TTL_S)
    cluster.expire()
    assert cpu_free(cluster, "node-a") == 64_000
    assert cluster.held == {}


def test_bound_pods_count_toward_no_bound_and_are_never_evicted(clock: FakeClock) -> None:
    cluster = cluster_of(clock, per_node=1, total=1)
    cluster.upsert_pod(bound("bound", "uid-bound", "node-a"))
    cluster.assume("uid-1", made_up(1), "node-a")
    cluster.assume("uid-2", made_up(2), "node-a")

    assert sorted(cluster.held) == ["uid-2", "uid-bound"]
    clock.advance(TTL_S)
    cluster.expire()
    assert list(cluster.held) == ["uid-bound"]


def test_a_pod_the_watch_binds_stops_being_an_assumption(clock: FakeClock) -> None:
    cluster = cluster_of(clock, per_node=1)
    cluster.assume("uid-1", made_up(1), "node-a")
    cluster.upsert_pod(bound("p1", "uid-1", "node-a"))
    assert cluster.holdings.assumed_count == 0
    cluster.assume("uid-2", made_up(2), "node-a")  # the node's one assumption slot is free

    assert sorted(cluster.held) == ["uid-1", "uid-2"]
    assert cluster.held["uid-1"].assumed_until is None


# ------------------------------------------------------------ the Node watch


@pytest.mark.parametrize(
    "bad",
    [node("node-a", "-1", "8Gi"), node("node-a", "8", "8Gi", gpus=10**9), {"metadata": []}],
    ids=["negative-cpu", "a-billion-gpus", "not-a-node"],
)
def test_a_bad_node_from_the_watch_is_skipped_and_breaks_nothing_after(
    clock: FakeClock, bad: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    cluster = cluster_of(clock)
    before = dict(cluster.specs)
    with caplog.at_level(logging.WARNING, "coordinator.live.cluster"):
        cluster.upsert_node(bad)
    assert cluster.specs == before
    assert "ignoring node" in caplog.text

    assert cluster.apply_report(build_report("node-a", now=clock.wall()))
    cluster.upsert_node(node("node-a", "32", "128Gi"))
    assert cluster.specs["node-a"].cpu_m == 32_000
    assert "node-a" in cluster.signals

    cluster.replace_nodes([bad, node("node-b", "64", "256Gi")])
    assert sorted(cluster.specs) == ["node-b"]
