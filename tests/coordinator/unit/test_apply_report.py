"""A report's way into the live cluster: freshness and order by the coordinator's own
clock (never the agent's ``measured_at``), unknown nodes, nodes a relist drops."""

from __future__ import annotations

import math

import pytest

from coordinator.config import CoordinatorSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.state import reports
from coordinator.state.podrequest import PodRequest
from coordinator.state.reports import signals_of
from hack.bench.ingest import gpu_node
from tests.hosts import FakeClock
from tests.kit import build_report

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
    report = build_report("gpu-a", now=clock.wall())
    assert cluster.apply_report(report)

    assert cluster.state is not None
    assert cluster.signals["gpu-a"].cpu_used_pct == report.usage.cpu.used_pct  # type: ignore[union-attr]
    assert (
        cluster.state.cpu_used_pct[row(cluster, "gpu-a")] == cluster.signals["gpu-a"].cpu_used_pct
    )
    assert math.isnan(cluster.state.cpu_used_pct[row(cluster, "gpu-b")])
    assert cluster.freshness.measured_at == {"gpu-a": clock.wall()}
    assert cluster.freshness.received_at == {"gpu-a": clock.monotonic()}


def test_a_report_whose_request_arrived_before_the_applied_ones_is_ignored(
    cluster: LiveCluster, clock: FakeClock
) -> None:
    """A retry that took longer than the report after it: the order is the coordinator's
    (when each request arrived), whatever the reports say they measured."""
    first_arrival = clock.monotonic()
    clock.advance(1)
    newer = build_report("gpu-a", now=clock.wall() - 3600, variant=1)  # dated an hour back
    older = build_report("gpu-a", now=clock.wall(), variant=2)
    assert cluster.apply_report(newer)
    before = cluster.signals["gpu-a"]

    assert not cluster.apply_report(older, received_at=first_arrival)
    assert cluster.signals["gpu-a"] is before
    assert cluster.freshness.received_at["gpu-a"] == clock.monotonic()
    assert cluster.freshness.measured_at["gpu-a"] == newer.measured_at


def test_reports_arriving_in_turn_each_apply_whatever_their_measured_at(
    cluster: LiveCluster, clock: FakeClock
) -> None:
    """A far-future date does not make the node's later, correct reports look late."""
    future = build_report("gpu-a", now=clock.wall() + 10 * 365 * 86400, variant=1)
    assert cluster.apply_report(future)
    clock.advance(5)
    correct = build_report("gpu-a", now=clock.wall(), variant=2)

    assert cluster.apply_report(correct)
    assert cluster.signals["gpu-a"] == signals_of(correct)
    assert cluster.freshness.measured_at["gpu-a"] == clock.wall()


def test_a_dead_agents_node_goes_unknown_after_the_ttl_whatever_its_measured_at(
    cluster: LiveCluster, clock: FakeClock
) -> None:
    ttl = cluster.settings.signals.report_ttl_s
    cluster.apply_report(build_report("gpu-a", now=clock.wall() + 10 * 365 * 86400))
    cluster.apply_report(build_report("gpu-b", now=clock.wall()))

    clock.advance(ttl)  # exactly the TTL: still fresh
    assert cluster.expire() == []
    assert set(cluster.signals) == {"gpu-a", "gpu-b"}
    clock.advance(0.5)
    assert sorted(cluster.expire()) == ["gpu-a", "gpu-b"]
    assert cluster.signals == {}
    assert cluster.state is not None
    assert math.isnan(cluster.state.cpu_used_pct[row(cluster, "gpu-a")])


def test_a_clock_stepped_back_leaves_fresh_reports_fresh(
    cluster: LiveCluster, clock: FakeClock
) -> None:
    """The node's clock jumped back hours (an NTP step): its report, received now, is
    fresh for the whole TTL from now."""
    ttl = cluster.settings.signals.report_ttl_s
    assert cluster.apply_report(build_report("gpu-a", now=clock.wall() - 3 * 3600))

    clock.advance(ttl - 1)
    assert cluster.expire() == []
    assert "gpu-a" in cluster.signals


def test_expiry_goes_by_the_monotonic_clock_not_the_wall_clock(
    cluster: LiveCluster, clock: FakeClock
) -> None:
    ttl = cluster.settings.signals.report_ttl_s
    cluster.apply_report(build_report("gpu-a", now=clock.wall()))
    clock.wall_s += 10 * ttl  # the coordinator's own wall clock steps forward

    assert cluster.expire() == []
    clock.mono_s += ttl + 1
    assert cluster.expire() == ["gpu-a"]


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

    assert set(cluster.signals) == set(cluster.freshness.measured_at) == {"gpu-b"}
    with pytest.raises(KeyError):
        cluster.apply_report(build_report("gpu-a", now=clock.wall() + 1))
    clock.advance(cluster.settings.signals.report_ttl_s + 1)
    assert cluster.expire() == ["gpu-b"]
    assert cluster.signals == {}


def test_explain_shows_the_agents_date_and_the_receipt_age(
    cluster: LiveCluster, clock: FakeClock
) -> None:
    pod = PodRequest(name="ns/p", cpu_m=1000, mem_b=2**30)
    assert cluster.explain(pod, "gpu-a")["report"] is None
    cluster.apply_report(build_report("gpu-a", now=clock.wall() - 3600))
    clock.advance(5)

    assert cluster.explain(pod, "gpu-a")["report"] == {
        "measured_at": clock.wall() - 3605,
        "received_s_ago": 5.0,
    }


def test_nodes_reporting_equal_nvlinks_share_one_matrix(cluster: LiveCluster) -> None:
    """Every node's signals are held until its next report: equal link matrices are one
    object, not one copy per node (~940 bytes each for 8 GPUs)."""
    for node in NODES:
        cluster.apply_report(build_report(node))
    a, b = (cluster.signals[n].gpu_links for n in NODES)
    report = build_report("gpu-a")
    assert report.gpus.nvlinks  # type: ignore[union-attr]
    assert a == tuple(tuple(row) for row in report.gpus.nvlinks)  # type: ignore[union-attr]
    assert a is b


def test_the_shared_nvlink_matrices_are_bounded() -> None:
    """A node sending a new matrix with every report keeps no more than the bound of them."""
    for k in range(reports._SHARED_LINKS_MAX + 10):
        assert reports._links([[k, 1], [1, k]]) == ((k, 1), (1, k))
    assert len(reports._shared_links) <= reports._SHARED_LINKS_MAX
