"""The patrol: nodes sampled from their reports and their pods' holdings, and judged under
the threshold only over a window that is sampled enough."""

from __future__ import annotations

import msgspec
import pytest

from coordinator.config import CoordinatorSettings, PatrolSettings
from coordinator.consolidation.patrol import SAMPLE_S, Patrol, utilisation_pct
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from hack.bench.ingest import gpu_node
from tests.hosts import FakeClock
from tests.kit import build_report

IDLE, BUSY = "gpu-node-00000", "gpu-node-00001"


def report(node: str, cpu_used_pct: float):  # noqa: ANN201 - a NodeReport
    base = build_report(node)
    cpu = msgspec.structs.replace(base.usage.cpu, used_pct=cpu_used_pct)
    return msgspec.structs.replace(base, usage=msgspec.structs.replace(base.usage, cpu=cpu))


def gpu_pod(name: str, node: str, gpus: int) -> dict:
    return {
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                                            "limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
        },
        "status": {"phase": "Running"},
    }  # fmt: skip


def rig(**settings: object) -> tuple[LiveCluster, Patrol, FakeClock]:
    clock = FakeClock(mono_s=86400.0)  # on a bucket boundary of every window
    cluster = LiveCluster(CoordinatorSettings(), clock, CoordinatorMetrics())
    cluster.replace_nodes([gpu_node(IDLE), gpu_node(BUSY)])
    return cluster, Patrol(cluster, PatrolSettings(**settings), clock), clock  # type: ignore[arg-type]


def run_for(
    cluster: LiveCluster, patrol: Patrol, clock: FakeClock, seconds: float, cpu: dict[str, float]
) -> None:
    """Every sample period: each node in ``cpu`` reports that CPU use, silent nodes go
    stale, the patrol samples."""
    for _ in range(int(seconds / SAMPLE_S)):
        for node, pct in cpu.items():
            assert cluster.apply_report(report(node, pct), clock.monotonic())
        cluster.expire()
        patrol.sample()
        clock.advance(SAMPLE_S)


def test_utilisation_is_the_larger_of_held_and_measured() -> None:
    cluster, _, clock = rig()
    assert utilisation_pct(cluster, IDLE) is None  # no report: not sampled, not idle
    cluster.apply_report(report(IDLE, 12.0), clock.monotonic())
    assert utilisation_pct(cluster, IDLE) == 12.0
    cluster.upsert_pod(gpu_pod("train", IDLE, 6))  # 6 of 8 GPUs held
    assert utilisation_pct(cluster, IDLE) == 75.0


def test_a_node_under_the_threshold_for_an_hour_is_a_candidate_with_its_reason() -> None:
    cluster, patrol, clock = rig()
    cluster.upsert_pod(gpu_pod("train", BUSY, 6))
    run_for(cluster, patrol, clock, 3600.0, {IDLE: 12.0, BUSY: 12.0})
    (candidate,) = patrol.candidates()
    assert candidate.node == IDLE and candidate.summary.window.name == "1h"
    # The bucket just begun holds no sample yet: 11 of 12 sampled.
    assert candidate.reason == (
        "mean utilisation 12.0% (peak 12.0%) over the last 1h, below 70% (92% of the window"
        " sampled)"
    )


def test_measured_cpu_above_the_threshold_keeps_a_node_off() -> None:
    cluster, patrol, clock = rig()
    run_for(cluster, patrol, clock, 3600.0, {IDLE: 12.0, BUSY: 85.0})
    assert [c.node for c in patrol.candidates()] == [IDLE]


def test_the_threshold_itself_is_not_under_it() -> None:
    cluster, patrol, clock = rig(threshold_pct=12.0)
    run_for(cluster, patrol, clock, 3600.0, {IDLE: 12.0, BUSY: 11.9})
    assert [c.node for c in patrol.candidates()] == [BUSY]


def test_a_window_sampled_too_little_judges_nothing() -> None:
    cluster, patrol, clock = rig()
    run_for(cluster, patrol, clock, 1800.0, {IDLE: 5.0})  # half an hour: 6 of 12 buckets
    assert patrol.candidates() == []
    hour = patrol.summaries(IDLE)[1]
    assert hour.coverage == 0.5 and hour.mean_pct == 5.0


def test_a_silent_node_gathers_no_samples_and_loses_its_mark() -> None:
    cluster, patrol, clock = rig()
    run_for(cluster, patrol, clock, 3600.0, {IDLE: 5.0})
    assert [c.node for c in patrol.candidates()] == [IDLE]
    run_for(cluster, patrol, clock, 1800.0, {})  # the agent went quiet for half an hour
    assert IDLE not in cluster.signals
    assert patrol.candidates() == []
    assert patrol.summaries(IDLE)[0].coverage == 0.0


def test_the_mark_names_the_longest_window_and_a_longer_setting_waits_for_it() -> None:
    cluster, patrol, clock = rig(window="1d")
    run_for(cluster, patrol, clock, 3600.0, {IDLE: 5.0})
    assert patrol.candidates() == []
    run_for(cluster, patrol, clock, 86400.0 - 3600.0, {IDLE: 5.0})
    (candidate,) = patrol.candidates()
    assert candidate.summary.window.name == "1d"


def test_a_node_gone_from_the_cluster_is_forgotten() -> None:
    cluster, patrol, clock = rig()
    run_for(cluster, patrol, clock, 60.0, {IDLE: 5.0})
    assert IDLE in patrol.windows
    cluster.replace_nodes([gpu_node(BUSY)])
    patrol.sample()
    assert IDLE not in patrol.windows


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"threshold_pct": 0}, "patrol.threshold_pct"),
        ({"threshold_pct": 101}, "patrol.threshold_pct"),
        ({"window": "2h"}, "patrol.window"),
        ({"min_coverage": 0}, "patrol.min_coverage"),
        ({"max_patches_per_s": 0}, "patrol.max_patches_per_s"),
    ],
)
def test_bad_patrol_settings_name_the_key(settings: dict, key: str) -> None:
    with pytest.raises(Exception, match=key):
        PatrolSettings(**settings)  # type: ignore[arg-type]


def test_an_unsampled_node_has_no_summaries() -> None:
    _, patrol, _ = rig()
    assert patrol.summaries(IDLE) == []
