"""An app serving ``POST /v1/reports`` over a LiveCluster of a few Nodes (loaded from Node
JSON, no report yet), a client for it, and the reports the tests send."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from aiohttp import ClientResponse, web
from aiohttp.test_utils import TestClient

from common import codec
from common.schema import NodeReport
from coordinator import ingest
from coordinator.auth import StaticTokens
from coordinator.config import CoordinatorSettings, IngestSettings, PolicySettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import SERVICES, Authenticator, Services
from tests.hosts import FakeClock
from tests.kit import build_report

NODES = ("node-a", "node-b", "gpu-1")
TOKENS = {"token-of-node-a": "node-a", "token-of-node-b": "node-b", "token-of-ghost": "ghost"}
"""Static tokens: one per node, and one of a node the cluster does not have."""
MAX_BODY_B = 64 * 1024
"""Small enough to test 413 cheaply; a full 8-GPU, 30-pod report is about 22 KiB."""


def node_json(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "224", "memory": "2Ti", "nvidia.com/gpu": "8", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def settings_with(**ingest_settings: Any) -> CoordinatorSettings:
    values = {"auth": "static", "static_tokens": TOKENS, "max_body_b": MAX_BODY_B}
    values.update(ingest_settings)
    return CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"), ingest=IngestSettings(**values)
    )


def report_for(node: str, *, seq: int = 1, variant: int = 0, now: float = 0.0) -> NodeReport:
    return build_report(node, seq=seq, variant=variant, now=now or 1_790_000_000.0)


def plain(report: NodeReport) -> dict[str, Any]:
    """The wire form of a report, to damage before packing it."""
    data: dict[str, Any] = codec.to_plain(report)
    return data


def pack(data: Any) -> bytes:
    return msgspec.msgpack.encode(data)


@dataclass
class IngestRig:
    services: Services
    client: TestClient
    clock: FakeClock

    @property
    def cluster(self) -> LiveCluster:
        return self.services.cluster

    async def post(
        self,
        body: Any,
        *,
        token: str | None = "token-of-node-a",
        content_type: str | None = ingest.CONTENT_TYPE,
        headers: Mapping[str, str] | None = None,
    ) -> ClientResponse:
        """POST a report (a NodeReport is encoded; bytes and generators go as they are)."""
        data = codec.encode(body) if isinstance(body, NodeReport) else body
        sent = dict(headers or {})
        if content_type is not None:
            sent["Content-Type"] = content_type
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return await self.client.post(ingest.REPORTS_PATH, data=data, headers=sent)

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a report could change in the cluster (float columns as bytes: NaN
        is unknown, and NaN != NaN)."""
        state = self.cluster.state
        assert state is not None
        return (
            dict(self.cluster.signals),
            dict(self.cluster.freshness.measured_at),
            dict(self.cluster.freshness.received_at),
            state.version.tolist(),
            state.cpu_pressure_pct.tobytes(),
            state.memory_pressure_pct.tobytes(),
            state.cpu_used_pct.tobytes(),
            state.contiguous_2mib_b.tolist(),
            state.true_allocatable_mem_b.tolist(),
            state.largest_numa_cpu_m.tolist(),
            list(state.topology_policy),
            list(state.gpu_links),
        )

    def outcomes(self) -> dict[str, float]:
        """``stowage_reports_total`` by outcome, zeros left out."""
        registry = self.services.metrics.registry
        counts = {}
        for outcome in ingest.OUTCOMES:
            value = registry.get_sample_value("stowage_reports_total", {"outcome": outcome})
            if value:
                counts[outcome] = value
        return counts

    def timed_requests(self) -> float:
        registry = self.services.metrics.registry
        labels = {"verb": "report"}
        return registry.get_sample_value("stowage_request_duration_seconds_count", labels) or 0.0


MakeRig = Callable[..., Awaitable[IngestRig]]


@pytest.fixture
def make_rig(aiohttp_client: Any, clock: FakeClock) -> MakeRig:
    async def make(
        settings: CoordinatorSettings | None = None,
        authenticator: Authenticator | None = None,
        nodes: Iterable[str] = NODES,
    ) -> IngestRig:
        settings = settings or settings_with()
        metrics = CoordinatorMetrics()
        cluster = LiveCluster(settings, clock, metrics)
        for name in nodes:
            cluster.upsert_node(node_json(name))
        services = Services(
            settings=settings,
            clock=clock,
            metrics=metrics,
            cluster=cluster,
            authenticator=authenticator or StaticTokens(settings.ingest.static_tokens),
        )
        app = web.Application(client_max_size=settings.ingest.max_body_b)
        app[SERVICES] = services
        ingest.add_routes(app)
        return IngestRig(services=services, client=await aiohttp_client(app), clock=clock)

    return make


@pytest.fixture
async def rig(make_rig: MakeRig) -> IngestRig:
    return await make_rig()
