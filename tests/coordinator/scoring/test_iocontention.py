"""Pods marked I/O-heavy skip nodes whose disks are saturated: from the agent's usage and
PSI sections through the coordinator's state to the filter's reason; other pods do not."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from common.schema import DiskUsage, NodeReport, PsiLine, PsiResource
from coordinator.config import CoordinatorSettings, IoSettings, PolicySettings, SignalSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.state.kubeobjects import pod_request
from coordinator.state.podrequest import PodRequest
from hack.bench.ingest import gpu_node
from tests.hosts import FakeClock
from tests.kit import build_report

GIB = 2**30
BUSY, CALM = "gpu-node-00000", "gpu-node-00001"


def pod(io_heavy: bool) -> PodRequest:
    labels = {"stowage.io/io-heavy": "true"} if io_heavy else {}
    return pod_request(
        {
            "metadata": {"name": "etl", "namespace": "data", "uid": "u1", "labels": labels},
            "spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        },
        0,
    )


Disks = list[tuple[str, float, float]]


def report(node: str, disks: Disks | None = None, io_avg10: float = 5.0) -> NodeReport:
    base = build_report(node)
    usage, psi = base.usage, base.psi
    assert not isinstance(usage, str) and not isinstance(psi, str)
    usage = msgspec.structs.replace(
        usage,
        disks=[DiskUsage(name=n, util_pct=u, await_ms=a, iops=100.0) for n, u, a in disks or []],
    )
    io = psi.system.io
    assert isinstance(io, PsiResource) and isinstance(io.some, PsiLine)
    io = msgspec.structs.replace(io, some=msgspec.structs.replace(io.some, avg10_pct=io_avg10))
    psi = msgspec.structs.replace(psi, system=msgspec.structs.replace(psi.system, io=io))
    return msgspec.structs.replace(base, usage=usage, psi=psi)


def live(settings: IoSettings | None = None) -> LiveCluster:
    signals = SignalSettings(io=settings or IoSettings())
    cluster = LiveCluster(
        CoordinatorSettings(policy=PolicySettings(name="stowage"), signals=signals),
        FakeClock(),
        CoordinatorMetrics(),
    )
    cluster.replace_nodes([gpu_node(BUSY), gpu_node(CALM)])
    assert cluster.apply_report(report(CALM, [("nvme0n1", 60.0, 0.4)]))
    return cluster


def test_the_mark_is_read_from_the_pods_label_or_annotation() -> None:
    assert pod(True).io_heavy and not pod(False).io_heavy


@pytest.mark.parametrize(
    ("busy", "reason"),
    [
        (
            {"disks": [("nvme0n1", 40.0, 0.3), ("sda", 98.0, 100.0)]},
            "I/O saturated: disk sda 98 % busy > 95 %, await 100 ms > 50 ms",
        ),
        ({"io_avg10": 55.0}, "I/O saturated: I/O pressure 55 % > 40 %"),
    ],
)
def test_an_io_heavy_pod_skips_a_saturated_node(busy: dict[str, Any], reason: str) -> None:
    cluster = live()
    cluster.apply_report(report(BUSY, **busy))
    heavy = cluster.filter(pod(True), [BUSY, CALM])

    assert heavy.passing == [CALM]
    assert heavy.failed == {BUSY: reason}
    assert cluster.filter(pod(False), [BUSY, CALM]).passing == [BUSY, CALM]
    assert cluster.explain(pod(True), BUSY)["filter"] == reason


@pytest.mark.parametrize(
    "disks",
    [
        [("sda", 99.0, 20.0)],  # busy but fast: room left
        [("sda", 50.0, 200.0)],  # slow but mostly idle
        [("sda", 95.0, 50.0)],  # at the thresholds, not above
    ],
)
def test_busy_or_slow_alone_is_not_saturated(disks: list[tuple[str, float, float]]) -> None:
    cluster = live()
    cluster.apply_report(report(BUSY, disks, io_avg10=40.0))

    assert cluster.filter(pod(True), [BUSY, CALM]).passing == [BUSY, CALM]


def test_thresholds_and_switch_are_the_settings() -> None:
    strict = live(IoSettings(disk_util_pct=50.0, disk_await_ms=10.0, io_pressure_pct=4.0))
    strict.apply_report(report(BUSY, [("sda", 60.0, 20.0)]))
    assert strict.filter(pod(True), [BUSY, CALM]).passing == []  # CALM: I/O pressure 5 %

    off = live(IoSettings(enabled=False))
    off.apply_report(report(BUSY, [("sda", 100.0, 900.0)], io_avg10=90.0))
    assert off.filter(pod(True), [BUSY, CALM]).passing == [BUSY, CALM]


def test_the_node_is_offered_again_once_its_disks_calm_down() -> None:
    cluster = live()
    cluster.apply_report(report(BUSY, [("sda", 100.0, 300.0)]))
    assert cluster.filter(pod(True), [BUSY]).passing == []
    cluster.clock.advance(10.0)  # type: ignore[attr-defined]
    cluster.apply_report(report(BUSY, [("sda", 30.0, 2.0)]))

    assert cluster.filter(pod(True), [BUSY]).passing == [BUSY]
