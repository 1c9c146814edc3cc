"""Per-node gauges in ``/metrics``: one series per node per signal, from the node view at
scrape time — the values ``/debug/nodes`` shows, on a real coordinator; a node that leaves
takes its series along; a thousand nodes give exactly a thousand series per signal."""

from __future__ import annotations

from collections import Counter

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator.config import CoordinatorSettings, PolicySettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.nodeview import NodeView
from hack.kubeapi.resources import NODES
from tests.coordinator.ingest.conftest import node_json
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start
from tests.coordinator.nodeview.nodeview_rig import two_nodes
from tests.hosts import FakeClock
from tests.kit import build_report

PER_NODE = (
    "stowage_node_fullness",
    "stowage_node_gpu_free_milli",
    "stowage_node_gpu_frag_milli",
    "stowage_node_memory_contiguity",
    "stowage_node_report_age_seconds",
    "stowage_node_stale",
    "stowage_node_throttled",
)
PSI = "stowage_node_psi_some_percent"


def node(name: str) -> tuple[tuple[str, str], ...]:
    return (("node", name),)


async def test_gauges_show_each_nodes_tile_and_a_node_that_leaves_takes_its_series(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    c = await two_nodes(api, start)
    samples = await c.scrape()
    assert samples["stowage_node_fullness"] == {node("cpu-b"): 0.0, node("gpu-a"): 0.5}
    assert samples["stowage_node_gpu_free_milli"] == {node("cpu-b"): 0.0, node("gpu-a"): 3000.0}
    assert samples["stowage_node_gpu_frag_milli"] == {node("gpu-a"): 1500.0}
    assert samples["stowage_node_memory_contiguity"] == {node("gpu-a"): pytest.approx(1024 / 1088)}
    assert samples[PSI] == {
        (("node", "gpu-a"), ("resource", "cpu")): 12.5,
        (("node", "gpu-a"), ("resource", "memory")): 12.5,
    }
    assert samples["stowage_node_stale"] == {node("cpu-b"): 1.0, node("gpu-a"): 0.0}
    assert samples["stowage_node_throttled"] == {node("cpu-b"): 0.0, node("gpu-a"): 0.0}
    assert set(samples["stowage_node_report_age_seconds"]) == {node("gpu-a")}

    api.store.delete(NODES, "", "gpu-a")
    await rig.eventually(lambda: "gpu-a" not in c.cluster.specs, "gpu-a gone from the cache")
    samples = await c.scrape()
    for metric in (*PER_NODE, PSI):
        names = {dict(labels)["node"] for labels in samples.get(metric, {})}
        assert "gpu-a" not in names, metric
    assert samples["stowage_node_fullness"] == {node("cpu-b"): 0.0}


def scrape(metrics: CoordinatorMetrics, view: NodeView) -> str:
    """The exposition, the node view's tiles taken now (as the ``/metrics`` handler does)."""
    metrics.nodes.tiles = view.tiles()
    return generate_latest(metrics.registry).decode()


def series(text: str) -> Counter[str]:
    """Series per metric in an exposition."""
    return Counter(s.name for f in text_string_to_metric_families(text) for s in f.samples)


def test_a_thousand_nodes_give_a_thousand_series_per_signal_and_no_more(
    clock: FakeClock,
) -> None:
    metrics = CoordinatorMetrics()
    settings = CoordinatorSettings(policy=PolicySettings(name="most-allocated"))
    cluster = LiveCluster(settings, clock, metrics)
    names = [f"gpu-{i:04}" for i in range(1000)]
    cluster.replace_nodes(node_json(n) for n in names)
    for name in names:
        cluster.apply_report(build_report(name, seq=1))
    one_gpu = {"cpu": "4", "nvidia.com/gpu": "1"}
    pending = {
        "metadata": {"name": "wait", "namespace": "jobs", "uid": "u-wait"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": one_gpu}}]},
        "status": {"phase": "Pending"},
    }
    cluster.upsert_pod(pending)
    view = NodeView(cluster)

    counts = series(scrape(metrics, view))
    assert {m: counts[m] for m in PER_NODE} == dict.fromkeys(PER_NODE, 1000)
    assert counts[PSI] == 2000  # cpu and memory

    cluster.remove_node("gpu-0500")
    text = scrape(metrics, view)
    counts = series(text)
    assert {m: counts[m] for m in PER_NODE} == dict.fromkeys(PER_NODE, 999)
    assert counts[PSI] == 1998
    assert 'node="gpu-0500"' not in text
