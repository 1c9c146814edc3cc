"""The coordinator's HTTP surface with the cluster coming from the emulated API server:
health, metrics, ``/debug/explain``, the kube-scheduler extender over watched nodes, and
reports it must refuse without changing anything."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from coordinator import ingest
from hack.kubeapi.resources import PODS
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

GIB, MIB = rig.GIB, rig.MIB
CONTIGUITY_REFUSAL = "memory contiguity 100 MiB < 512 MiB needed"


async def cluster_with_a_report(
    api: rig.RecordingKubeApi, start: Start, report_ttl_s: float = 30.0
) -> rig.Coordinator:
    """worker-1 (8 CPUs) whose agent measured 100 MiB free in 2 MiB blocks, worker-2
    (16 CPUs) without a report, and two pending pods, one needing contiguous memory."""
    api.add_node("worker-1", capacity={"cpu": "8", "memory": "32Gi"})
    api.add_node("worker-2", capacity={"cpu": "16", "memory": "64Gi"})
    requests = {"cpu": "2", "memory": "4Gi"}
    contiguous = {"stowage.io/needs-contiguous-memory": "true"}
    api.add_pod("train", "jobs", phase="Pending", requests=requests, annotations=contiguous)
    api.add_pod("web", "jobs", phase="Pending", requests=requests)
    c = await start(rig.settings(report_ttl_s=report_ttl_s))
    await rig.eventually(
        lambda: c.services.synced.is_set() and {"jobs/train", "jobs/web"} <= set(c.cluster.pods),
        "caches synced",
    )
    report = rig.node_report("worker-1", free_2mib_b=100 * MIB)
    status, _ = await c.report(report, api.agent_token("worker-1"))
    assert status == 200
    return c


async def test_health_and_metrics_tell_what_happened(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    c = await cluster_with_a_report(api, start, report_ttl_s=4.0)
    assert await c.get("/healthz") == (200, "ok\n")
    assert await c.get("/readyz") == (200, "ready\n")
    status, _ = await c.report(b"\xc1 not msgpack", api.agent_token("worker-2"))
    assert status == 400
    await rig.eventually(lambda: len(api.patches("worker-1")) >= 2, "worker-1 published")
    await rig.eventually(lambda: c.metric("stowage_stale_nodes") == 1, "worker-2 counted stale")

    samples = await c.scrape()
    assert samples["stowage_reports_total"] == {
        (("outcome", "accepted"),): 1.0,
        (("outcome", "invalid"),): 1.0,
    }
    assert samples["stowage_request_duration_seconds_count"][(("verb", "report"),)] == 2
    assert samples["stowage_stale_nodes"] == {(): 1.0}
    ok = samples["stowage_node_patches_total"][(("result", "ok"),)]
    assert ok == len(api.patches("worker-1")) + len(api.patches("worker-2"))
    assert samples["stowage_leader"] == {(): 1.0}
    assert samples["stowage_nodes"] == {(): 2.0}


async def test_explain_gives_the_filter_verdict_and_score_components_of_a_pending_pod(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    c = await cluster_with_a_report(api, start)

    status, text = await c.get_debug("/debug/explain", pod="jobs/train", node="worker-1")
    assert status == 200
    refused = json.loads(text)
    assert refused["pod"] == "jobs/train"
    assert refused["node"] == "worker-1"
    assert refused["policy"] == "stowage"
    assert refused["signals"] == "fresh"
    assert refused["filter"] == CONTIGUITY_REFUSAL

    status, text = await c.get_debug("/debug/explain", pod="jobs/train", node="worker-2")
    assert status == 200
    passing = json.loads(text)
    assert passing["filter"] == "passes"
    assert passing["signals"].startswith("unknown")
    components = passing["components"]
    assert components["feasible"] == 1.0
    for name in (
        "fragmentation_before_milli",
        "fragmentation_after_milli",
        "stranded_before_milli",
        "stranded_after_milli",
    ):
        assert isinstance(components[name], float), name

    assert (await c.get_debug("/debug/explain", pod="jobs/train"))[0] == 400
    assert (await c.get_debug("/debug/explain", node="worker-1"))[0] == 400
    status, text = await c.get_debug("/debug/explain", pod="jobs/nothing", node="worker-1")
    assert (status, json.loads(text)) == (404, {"error": "pod jobs/nothing is not known"})
    status, text = await c.get_debug("/debug/explain", pod="jobs/train", node="ghost")
    assert (status, json.loads(text)) == (404, {"error": "node ghost is not known"})


async def test_the_extender_judges_the_nodes_the_watch_brought(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    """kube-scheduler in NodeNames mode (``nodeCacheCapable``) sends the pod as the API
    server has it and only names; the nodes behind them come from our Node watch."""
    c = await cluster_with_a_report(api, start)
    api.add_node("worker-tiny", capacity={"cpu": "1", "memory": "2Gi"})
    await rig.eventually(lambda: "worker-tiny" in c.cluster.specs, "worker-tiny watched")
    names = ["worker-1", "worker-2", "worker-tiny", "not-in-the-cache"]

    def args(pod: str) -> dict[str, Any]:
        return {"Pod": api.store.get(PODS, "jobs", pod), "Nodes": None, "NodeNames": names}

    status, reply = await c.post_json("/scheduler/filter", args("train"))
    assert status == 200
    assert reply == {
        "Nodes": None,
        "NodeNames": ["worker-2"],  # it passes, as the unknown name does; picked alone
        "FailedNodes": {
            "worker-1": CONTIGUITY_REFUSAL,
            "worker-tiny": "CPU 1000m free < 2000m requested",
        },
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }
    status, reply = await c.post_json("/scheduler/filter", args("web"))
    assert status == 200
    assert reply["NodeNames"] == ["worker-1"]  # all three pass; Stowage's first choice alone

    status, reply = await c.post_json("/scheduler/prioritize", args("web"))
    assert status == 200
    scores = {entry["Host"]: entry["Score"] for entry in reply}
    assert set(scores) == set(names)
    assert scores["worker-tiny"] == 0 and scores["not-in-the-cache"] == 0  # cannot / unknown
    assert max(scores["worker-1"], scores["worker-2"]) == 10
    assert all(0 <= s <= 10 for s in scores.values())
    assert c.metric("stowage_request_duration_seconds_count", {"verb": "filter"}) == 2


async def test_refused_reports_change_nothing(api: rig.RecordingKubeApi, start: Start) -> None:
    c = await cluster_with_a_report(api, start)
    await rig.eventually(
        lambda: rig.contiguity(api.annotations("worker-1")) == "0.10Gi", "worker-1 published"
    )
    before = (dict(c.cluster.freshness.measured_at), dict(c.cluster.signals), list(api.seen))
    annotations = {n: api.annotations(n) for n in ("worker-1", "worker-2")}
    api.add_token("token-of-ghost", node="ghost", audiences=[rig.AUDIENCE])
    w2 = api.agent_token("worker-2")
    cases = [
        # (report or bytes, token, status, outcome)
        (rig.node_report("ghost", free_2mib_b=GIB), "token-of-ghost", 409, "unknown_node"),
        (rig.node_report("worker-1", free_2mib_b=GIB), w2, 403, "node_mismatch"),
        (rig.node_report("worker-2", free_2mib_b=GIB), None, 401, "unauthenticated"),
        (rig.node_report("worker-2", free_2mib_b=GIB), "not-a-token", 401, "unauthenticated"),
        (b"\xc1\xc1\xc1", w2, 400, "invalid"),
        (msgspec.msgpack.encode({"schema_version": 1, "node": "worker-2"}), w2, 400, "invalid"),
    ]
    for body, token, status, outcome in cases:
        got, reply = await c.report(body, token)
        assert got == status, (outcome, reply)
        assert "error" in json.loads(reply)
    await rig.publisher_ticks(c, 3)
    assert (dict(c.cluster.freshness.measured_at), dict(c.cluster.signals)) == before[:2]
    assert {n: api.annotations(n) for n in annotations} == annotations
    writes = [s for s in api.seen[len(before[2]) :] if s.method == "PATCH"]
    assert writes == []
    outcomes = {o: c.metric("stowage_reports_total", {"outcome": o}) for o in ingest.OUTCOMES}
    assert {o: n for o, n in outcomes.items() if n} == {
        "accepted": 1,
        "unknown_node": 1,
        "node_mismatch": 1,
        "unauthenticated": 2,
        "invalid": 2,
    }
