"""The node view over time, on a clock the test moves: a report's age by the coordinator's
receipt clock whatever the agent wrote, staleness once the report TTL passes (the node
still counts as reporting), and a colocation throttle with its reason."""

from __future__ import annotations

from msgspec import structs

from coordinator.config import CoordinatorSettings, PolicySettings, SignalSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.nodeview import NodeView, Tile
from tests.coordinator.ingest.conftest import node_json, report_for
from tests.coordinator.ingest.test_ingest_colocation import colocated
from tests.hosts import FakeClock


def cluster_of(clock: FakeClock, *names: str) -> LiveCluster:
    settings = CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"), signals=SignalSettings(report_ttl_s=30.0)
    )
    cluster = LiveCluster(settings, clock, CoordinatorMetrics())
    cluster.replace_nodes(node_json(n) for n in names)
    return cluster


def tile(cluster: LiveCluster, name: str) -> Tile:
    return next(t for t in NodeView(cluster).tiles() if t["name"] == name)


def test_age_is_by_receipt_and_a_silent_node_turns_stale_but_still_reporting(
    clock: FakeClock,
) -> None:
    cluster = cluster_of(clock, "node-a")
    # The agent's clock says an hour ago: age goes by when the coordinator received it.
    report = structs.replace(report_for("node-a"), measured_at=clock.wall() - 3600.0)
    cluster.apply_report(report)
    clock.advance(7.0)
    fresh = tile(cluster, "node-a")
    assert (fresh["age_s"], fresh["stale"], fresh["reporting"]) == (7.0, False, True)
    assert fresh["psi_cpu"] is not None and fresh["contiguity"] is not None

    clock.advance(24.0)  # 31 s since the report: past the 30 s TTL
    assert cluster.expire() == ["node-a"]
    silent = tile(cluster, "node-a")
    assert (silent["age_s"], silent["stale"], silent["reporting"]) == (31.0, True, True)
    assert (silent["psi_cpu"], silent["psi_memory"], silent["contiguity"]) == (None, None, None)


def test_a_throttled_node_shows_its_quota_reason(clock: FakeClock) -> None:
    cluster = cluster_of(clock, "node-a", "node-b")
    cluster.apply_report(colocated("node-a", 45.0, seq=1))
    assert tile(cluster, "node-a")["throttled"] is False  # high, but not for 10 s yet
    clock.advance(10.0)
    cluster.apply_report(colocated("node-a", 47.5, seq=2))
    throttled = tile(cluster, "node-a")
    assert throttled["throttled"] is True
    assert throttled["throttle_reason"] == "tightened: LS cpu some avg10 47.5% >= 30% for 10s"
    other = tile(cluster, "node-b")
    assert (other["throttled"], other["throttle_reason"]) == (False, None)


def pending(name: str, requests: dict[str, str]) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "jobs", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
        "status": {"phase": "Pending"},
    }


def test_fragmentation_follows_the_pod_mix_counted_again_every_30_s(clock: FakeClock) -> None:
    cluster = cluster_of(clock, "node-a")  # 8 free GPUs, 224 free CPUs
    view = NodeView(cluster)
    cluster.upsert_pod(pending("cpu-only", {"cpu": "2"}))
    # The only typical pod needs no GPU: every free milli is a fragment for it.
    assert view.tiles()[0]["gpu_frag_milli"] == 8000.0
    cluster.upsert_pod(pending("one-gpu", {"cpu": "4", "nvidia.com/gpu": "1"}))
    clock.advance(29.0)
    assert view.tiles()[0]["gpu_frag_milli"] == 8000.0  # the mix as counted 29 s ago
    clock.advance(1.0)
    # Half the pods need no GPU (8000 milli of fragments), half fit on any GPU (none).
    assert view.tiles()[0]["gpu_frag_milli"] == 4000.0
