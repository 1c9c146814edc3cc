"""A report's way into the live cluster: late reports, unknown nodes, nodes a relist drops."""

from __future__ import annotations

import math

import pytest

from coordinator.config import CoordinatorSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from hack.bench.ingest import gpu_node
from hack.loadgen.reports import build_report
from tests.hosts import FakeClock

NODES = ["gpu-a", "gpu-b"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cluster(clock: FakeClock) -> LiveCluster:
    cluster = LiveCluster(CoordinatorSettings(), clock, CoordinatorMetrics())
    cluster.replace_nodes([gpu_node(n) for n in NODES])
    return cluster


def row(cluster: LiveCluster, node: str) -> int:
    assert cluster.state is not None
    return cluster.state.index[node]


def test_a_report_fills_its_nodes_row(cluster: LiveCluster, clock: FakeClock) -> None:
    assert cluster.apply_report(build_report("gpu-a", now=clock.wall()))

    assert cluster.state is not None
    assert cluster.state.measured_at[row(cluster, "gpu-a")] == clock.wall()
    assert math.isnan(cluster.state.measured_at[row(cluster, "gpu-b")])
    assert cluster.last_report_at == {"gpu-a": clock.wall()}


def test_a_late_report_is_ignored(cluster: LiveCluster, clock: FakeClock) -> None:
    newer = build_report("gpu-a", now=clock.wall(), variant=1)
    older = build_report("gpu-a", now=clock.wall() - 5, variant=2)
    assert cluster.apply_report(newer)
    before = cluster.signals["gpu-a"]

    assert not cluster.apply_report(older)
    assert cluster.signals["gpu-a"] is before
    assert cluster.last_report_at["gpu-a"] == clock.wall()


def test_a_report_of_an_unknown_node_is_a_key_error(cluster: LiveCluster, clock: FakeClock) -> None:
    with pytest.raises(KeyError):
        cluster.apply_report(build_report("gpu-z", now=clock.wall()))
    assert cluster.signals == {}


def test_a_relist_without_a_node_forgets_its_reports(
    cluster: LiveCluster, clock: FakeClock
) -> None:
    for node in NODES:
        assert cluster.apply_report(build_report(node, now=clock.wall()))

    cluster.replace_nodes([gpu_node("gpu-b")])

    assert set(cluster.signals) == set(cluster.last_report_at) == {"gpu-b"}
    with pytest.raises(KeyError):
        cluster.apply_report(build_report("gpu-a", now=clock.wall() + 1))
    clock.advance(cluster.settings.signals.report_ttl_s + 1)
    assert cluster.expire() == ["gpu-b"]
    assert cluster.signals == {}
