"""``GET /debug/evictions``: the executor's decisions, one line each, oldest first."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from coordinator import debug
from coordinator.config import CoordinatorSettings
from coordinator.decisionlog import Decision
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import SERVICES, Services
from tests.hosts import FakeClock


class NoAuthenticator:
    async def authenticate(self, token: str | None) -> None:
        return None


async def test_the_decisions_are_listed_one_a_line(aiohttp_client: Any) -> None:
    clock, settings, metrics = FakeClock(), CoordinatorSettings(), CoordinatorMetrics()
    services = Services(
        settings, clock, metrics, LiveCluster(settings, clock, metrics), NoAuthenticator()
    )
    app = web.Application()
    app[SERVICES] = services
    debug.add_routes(app)
    client = await aiohttp_client(app)
    assert await (await client.get("/debug/evictions")).text() == ""
    services.evictions.add(
        Decision(0.0, "pressure", "n1", "dry-run", "memory full 40%", (("ns/a", "dry-run"),))
    )
    services.evictions.add(Decision(60.0, "preemption", "ns/big", "refused", "queue cooling"))
    resp = await client.get("/debug/evictions")
    assert resp.status == 200
    assert (await resp.text()).splitlines() == [
        "1970-01-01T00:00:00Z pressure n1 dry-run: memory full 40% [ns/a=dry-run]",
        "1970-01-01T00:01:00Z preemption ns/big refused: queue cooling",
    ]
