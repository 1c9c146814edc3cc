"""An app serving the scheduler endpoints over a LiveCluster of the nodes in
:mod:`tests.coordinator.extender.kubejson`, and a client for it."""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from coordinator.config import CoordinatorSettings, ExtenderSettings, PolicySettings
from coordinator.extender import kube, volcano
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import SERVICES, Services
from coordinator.state.signals import NodeSignals
from tests.coordinator.extender.kubejson import NODES
from tests.hosts import FakeClock


class NoAuthenticator:
    async def authenticate(self, token: str | None) -> None:
        return None


@dataclass
class Rig:
    services: Services
    client: TestClient
    clock: FakeClock

    @property
    def cluster(self) -> LiveCluster:
        return self.services.cluster

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        """POST ``body`` (JSON-encoded unless already bytes); the status and parsed reply."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        resp = await self.client.post(
            path, data=io.BytesIO(data), headers={"Content-Type": "application/json"}
        )
        assert resp.content_type == "application/json"
        return resp.status, json.loads(await resp.text())

    async def assert_refused(self, path: str, body: Any, message: str) -> None:
        """``body`` is a 400 whose error starts with ``message``, and changes nothing
        (a node it offers, ``new-1``, does not join)."""
        before = self.snapshot()
        status, reply = await self.post(path, body)
        assert status == 400
        assert set(reply) == {"error"}
        assert reply["error"].startswith(message)
        assert self.snapshot() == before
        assert "new-1" not in self.cluster.specs

    def set_signals(self, name: str, **values: Any) -> None:
        """What an agent's fresh report of node ``name`` would say."""
        signals = NodeSignals(measured_at=self.clock.wall(), **values)
        self.cluster.signals[name] = signals
        assert self.cluster.state is not None
        self.cluster.state.set_signals(self.cluster.state.index[name], signals)

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a request could change in the cluster."""
        state = self.cluster.state
        assert state is not None
        return (
            dict(self.cluster.specs),
            dict(self.cluster.held),
            dict(self.cluster.signals),
            state.version.copy().tolist(),
            state.cpu_free.copy().tolist(),
            np.asarray(state.gpu_free).copy().tolist(),
        )

    def requests_seen(self, verb: str) -> float:
        registry = self.services.metrics.registry
        value = registry.get_sample_value("stowage_request_duration_seconds_count", {"verb": verb})
        return value or 0.0


MakeRig = Callable[..., Awaitable[Rig]]

MOST_ALLOCATED = CoordinatorSettings(
    policy=PolicySettings(name="most-allocated"),
    extender=ExtenderSettings(pick_in_filter=False),
)
"""kube-scheduler's MostAllocated (cpu and memory, weight 1): scores a test can work out
by hand — ``(cpu_used% + mem_used%) / 2``, truncated. Filter answers every passing node
(what these tests are about); ``test_extender_picking`` has it pick."""


@pytest.fixture
def make_rig(aiohttp_client: Any, clock: FakeClock) -> MakeRig:
    async def make(
        settings: CoordinatorSettings = MOST_ALLOCATED, nodes: Iterable[str] = tuple(NODES)
    ) -> Rig:
        metrics = CoordinatorMetrics()
        cluster = LiveCluster(settings, clock, metrics)
        for name in nodes:
            cluster.upsert_node(NODES[name])
        services = Services(
            settings=settings,
            clock=clock,
            metrics=metrics,
            cluster=cluster,
            authenticator=NoAuthenticator(),
        )
        app = web.Application()
        app[SERVICES] = services
        kube.add_routes(app)
        volcano.add_routes(app)
        return Rig(services=services, client=await aiohttp_client(app), clock=clock)

    return make


@pytest.fixture
async def rig(make_rig: MakeRig) -> Rig:
    return await make_rig()
