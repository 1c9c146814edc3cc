"""The switches under ``signals:`` take effect on a report's way into the state: a signal
switched off reads as not measured, and the policies score as if the agent had not sent it."""

from __future__ import annotations

import pytest

from common.clock import SystemClock
from coordinator.config import CoordinatorSettings, PolicySettings, SignalSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.state.podrequest import PodRequest
from hack.bench.ingest import gpu_node
from tests.kit import build_report

GIB = 2**30
NODE = "gpu-node-00000"
TWO_GPUS = PodRequest("ns/p", cpu_m=8000, mem_b=64 * GIB, gpus=2, gpu_milli=1000)


def cluster_with_a_report(**switches: bool) -> LiveCluster:
    settings = CoordinatorSettings(
        policy=PolicySettings(name="stowage"), signals=SignalSettings(**switches)
    )
    cluster = LiveCluster(settings, SystemClock(), CoordinatorMetrics())
    cluster.replace_nodes([gpu_node(NODE)])
    report = build_report(NODE, now=SystemClock().wall())
    assert cluster.apply_report(report)
    return cluster


@pytest.mark.parametrize("on", [True, False])
def test_gpu_topology_switch(on: bool):
    cluster = cluster_with_a_report(gpu_topology=on)
    state = cluster.state
    assert state is not None
    assert cluster.signals[NODE].gpu_links is not None  # the agent did report its NVLinks
    assert (state.gpu_links[0] is not None) is on
    components = cluster.explain(TWO_GPUS, NODE)["components"]
    assert ("nvlink_points" in components) is on


@pytest.mark.parametrize("on", [True, False])
def test_true_allocatable_switch(on: bool):
    cluster = cluster_with_a_report(true_allocatable=on)
    state = cluster.state
    assert state is not None
    reported = cluster.signals[NODE].true_allocatable_mem_b
    assert reported > 0
    assert state.true_allocatable_mem_b[0] == (reported if on else -1)
