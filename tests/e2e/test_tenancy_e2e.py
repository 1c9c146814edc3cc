"""Tenancy end to end: the agent's own collectors read a recorded two-NUMA host (sysfs and
a cgroup v2 tree as kubelet's static CPU manager leaves it) and a kubelet ``/pods`` served
over real HTTP; their report goes to the coordinator's ingest endpoint, and the
coordinator's ``/scheduler/filter`` answers kube-scheduler from it.

The host: NUMA node 0 has CPUs 0-31, node 1 CPUs 32-63; kubelet's topology manager is
``single-numa-node``. Tenant ``team-a`` runs a pod pinned to CPUs 40-43 (NUMA node 1), and
the rule is ``exclusive``."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from agent.collectors.numa import NumaCollector
from agent.collectors.pods import PodsCollector
from agent.podnuma import PodNuma
from agent.settings import PodsSettings
from common import codec
from common.schema import NodeReport, NumaSection, PodsSection
from coordinator import ingest
from coordinator.auth import StaticTokens
from coordinator.config import (
    CoordinatorSettings,
    ExtenderSettings,
    IngestSettings,
    PolicySettings,
    SignalSettings,
    TenancySettings,
)
from coordinator.extender import kube
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import SERVICES, Services
from tests.hosts import FIXTURES, FakeClock
from tests.kit import build_report

NODE = "node-a"
TOKEN = "token-of-node-a"
HOST = FIXTURES / "two-numa-hugepages" / "sys"


def kube_pod(name: str, namespace: str, cpu: str, node: str | None = NODE) -> dict[str, Any]:
    """A Guaranteed pod with whole CPUs: kubelet pins it to one NUMA node."""
    requests = {"cpu": cpu, "memory": "4Gi"}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": requests, "limits": requests}}]
    }
    if node:
        spec["nodeName"] = node
    uid = f"{name[0] * 8}-0000-4000-8000-{name[-1] * 12}"  # a1: aaaaaaaa-…-111111111111
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


class FakeKubelet:
    """The kubelet's ``GET /pods`` (its PodList), in a thread of its own: the agent's
    collectors are synchronous."""

    def __init__(self) -> None:
        self.pods: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server name)
                body = json.dumps({"kind": "PodList", "items": outer.pods}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Agent:
    """The agent's NUMA and pods collectors over the recorded host."""

    def __init__(self, root: Path, kubelet: FakeKubelet, clock: FakeClock) -> None:
        self.sys = root / "sys"
        shutil.copytree(HOST, self.sys)
        self.cgroup = root / "cgroup"
        (self.cgroup / "kubepods.slice").mkdir(parents=True)
        (self.cgroup / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        self.clock = clock
        self.pods = PodsCollector(
            PodsSettings(source="kubelet", kubelet_url=kubelet.url),
            NODE,
            clock,
            environ={},
            numa=PodNuma(self.cgroup, self.sys, clock),
        )
        self.seq = 0

    def pin(self, pod: dict[str, Any], cpus: str) -> None:
        """kubelet started ``pod``'s container on ``cpus`` (systemd driver, Guaranteed)."""
        slice_ = f"kubepods-pod{pod['metadata']['uid'].replace('-', '_')}.slice"
        scope = self.cgroup / "kubepods.slice" / slice_ / "cri-containerd-0001.scope"
        scope.mkdir(parents=True, exist_ok=True)
        (scope / "cpuset.cpus.effective").write_text(cpus + "\n")

    def report(self) -> NodeReport:
        self.seq += 1
        numa, pods = NumaCollector(self.sys, self.clock).collect(), self.pods.collect()
        base = build_report(NODE, seq=self.seq, now=self.clock.wall(), pods=0, gpus=0)
        return msgspec.structs.replace(base, numa=numa, pods=pods, pod_usage=None)


@pytest.fixture
def kubelet() -> Iterator[FakeKubelet]:
    server = FakeKubelet()
    yield server
    server.stop()


@pytest.fixture
async def coordinator(aiohttp_client: Any, clock: FakeClock) -> TestClient:
    settings = CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"),
        extender=ExtenderSettings(pick_in_filter=False),
        ingest=IngestSettings(auth="static", static_tokens={TOKEN: NODE}),
        signals=SignalSettings(tenancy=TenancySettings(rule="exclusive")),
    )
    metrics = CoordinatorMetrics()
    cluster = LiveCluster(settings, clock, metrics)
    allocatable = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    cluster.upsert_node({"metadata": {"name": NODE}, "status": {"allocatable": allocatable}})
    services = Services(
        settings=settings,
        clock=clock,
        metrics=metrics,
        cluster=cluster,
        authenticator=StaticTokens(settings.ingest.static_tokens),
    )
    app = web.Application()
    app[SERVICES] = services
    ingest.add_routes(app)
    kube.add_routes(app)
    client: TestClient = await aiohttp_client(app)
    return client


def services(client: TestClient) -> Services:
    found: Services = client.app[SERVICES]
    return found


async def deliver(client: TestClient, report: NodeReport | bytes) -> int:
    body = report if isinstance(report, bytes) else codec.encode(report)
    headers = {"Content-Type": ingest.CONTENT_TYPE, "Authorization": f"Bearer {TOKEN}"}
    resp = await client.post(ingest.REPORTS_PATH, data=body, headers=headers)
    return resp.status


async def filter_answer(client: TestClient, pod: dict[str, Any]) -> dict[str, Any]:
    body = {"Pod": pod, "Nodes": None, "NodeNames": [NODE]}
    resp = await client.post("/scheduler/filter", json=body)
    assert resp.status == 200
    answer: dict[str, Any] = await resp.json()
    return answer


async def test_the_agents_placement_decides_the_filters_answer(
    tmp_path: Path, kubelet: FakeKubelet, coordinator: TestClient, clock: FakeClock
) -> None:
    agent = Agent(tmp_path, kubelet, clock)
    cluster = services(coordinator).cluster
    serving = kube_pod("a1", "team-a", "4")
    kubelet.pods = [serving]
    cluster.upsert_pod(serving)  # the watch
    agent.pin(serving, "40-43")
    report = agent.report()
    assert isinstance(report.pods, PodsSection)
    assert [p.numa_nodes for p in report.pods.pods] == [[1]]  # read from its cpuset
    assert await deliver(coordinator, report) == 200

    # team-b's 32-CPU pod fits NUMA node 0, which no other tenant uses.
    newcomer = kube_pod("b1", "team-b", "32", node=None)
    answer = await filter_answer(coordinator, newcomer)
    assert answer["NodeNames"] == [NODE] and answer["FailedAndUnresolvableNodes"] == {}

    # team-a starts a second pod, pinned to CPUs 0-3: NUMA node 0 is team-a's too now.
    batch = kube_pod("a2", "team-a", "4")
    kubelet.pods = [serving, batch]
    cluster.upsert_pod(batch)
    agent.pin(batch, "0-3")
    clock.advance(10)
    assert await deliver(coordinator, agent.report()) == 200
    answer = await filter_answer(coordinator, newcomer)
    assert answer["NodeNames"] == []
    assert answer["FailedAndUnresolvableNodes"] == {
        NODE: "NUMA tenancy (exclusive): no NUMA node with 32 CPUs is free of other tenants'"
        " pods (1 tenant kept apart, on 2 of 2 NUMA nodes)"
    }
    # team-a itself still fits.
    answer = await filter_answer(coordinator, kube_pod("a3", "team-a", "8", node=None))
    assert answer["NodeNames"] == [NODE]
    agent.pods.close()


async def test_a_report_placing_a_pod_on_a_numa_node_the_host_lacks_is_refused(
    tmp_path: Path, kubelet: FakeKubelet, coordinator: TestClient, clock: FakeClock
) -> None:
    agent = Agent(tmp_path, kubelet, clock)
    cluster = services(coordinator).cluster
    serving = kube_pod("a1", "team-a", "4")
    kubelet.pods = [serving]
    cluster.upsert_pod(serving)
    agent.pin(serving, "40-43")
    assert await deliver(coordinator, agent.report()) == 200
    before = (dict(cluster.signals), dict(cluster.freshness.received_at))
    clock.advance(10)
    forged = codec.to_plain(agent.report())
    forged["pods"]["pods"][0]["numa_nodes"] = [7]  # the host has NUMA nodes 0 and 1
    resp = await coordinator.post(
        ingest.REPORTS_PATH,
        data=msgspec.msgpack.encode(forged),
        headers={"Content-Type": ingest.CONTENT_TYPE, "Authorization": f"Bearer {TOKEN}"},
    )
    assert resp.status == 400
    assert (await resp.json())["error"] == (
        "pods.pods[0].numa_nodes: [7] not among the NUMA section's nodes"
    )
    assert (dict(cluster.signals), dict(cluster.freshness.received_at)) == before
    # A cpuset naming CPUs the host lacks: the agent leaves that pod unplaced (every NUMA
    # node, the cautious reading), and the report is accepted.
    agent.pin(serving, "60-67")
    report = agent.report()
    assert isinstance(report.pods, PodsSection) and isinstance(report.numa, NumaSection)
    assert report.pods.pods[0].numa_nodes is None
    assert await deliver(coordinator, report) == 200
    answer = await filter_answer(coordinator, kube_pod("b1", "team-b", "4", node=None))
    assert NODE in answer["FailedAndUnresolvableNodes"]
    agent.pods.close()
