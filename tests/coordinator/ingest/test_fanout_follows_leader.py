"""An agent reporting to a leader and a follower (real coordinators' ingest on real HTTP
servers, the agent's real fan-out reporter) follows the leader's throttle, and keeps it
when leadership moves: the new leader stepped the same reports and holds the same quota."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from aiohttp import web

from agent.fanout import FanOutReporter
from agent.metrics import AgentMetrics
from agent.settings import ReporterSettings
from common.schema import NodeReport
from coordinator import ingest
from coordinator.auth import NoAuth
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import SERVICES, Services
from tests.coordinator.ingest.conftest import node_json, settings_with
from tests.coordinator.ingest.test_ingest_colocation import colocated
from tests.hosts import FakeClock

COORDINATOR = "http://coordinator.example:8080"


def replica(clock: FakeClock, *, leading: bool) -> Services:
    settings = settings_with(auth="none")
    cluster = LiveCluster(settings, clock, CoordinatorMetrics())
    cluster.upsert_node(node_json("node-a"))
    cluster.colocation.elected = True  # leader election runs
    services = Services(settings, clock, cluster.metrics, cluster, NoAuth())
    if leading:
        services.leader.set()
    return services


async def test_the_agent_follows_the_leader_across_a_takeover(aiohttp_server: Any) -> None:
    clock = FakeClock()
    leader, follower = replica(clock, leading=True), replica(clock, leading=False)
    servers = []
    for services in (leader, follower):
        app = web.Application()
        app[SERVICES] = services
        ingest.add_routes(app)
        servers.append(await aiohttp_server(app))
    urls = [str(s.make_url("")).rstrip("/") for s in servers]

    async def resolve(url: str) -> list[str]:
        return list(urls)

    answered = asyncio.Event()
    fan = FanOutReporter(
        dataclasses.replace(ReporterSettings(), coordinator_url=COORDINATOR),
        metrics=AgentMetrics(),
        clock=clock,
        resolve=resolve,
        refresh_s=3600,
        on_directives=answered.set,
    )

    async def send(report: NodeReport) -> None:
        """Offer a report and wait until both replicas answered it."""
        fan.offer(report)
        async with asyncio.timeout(10):
            while not all(
                r.directives is not None and r.directives.issued_at == clock.wall()
                for r in fan.reporters.values()
            ):
                answered.clear()
                await answered.wait()

    await fan.start()
    try:
        await send(colocated("node-a", 45.0, seq=1))
        clock.advance(10.0)
        await send(colocated("node-a", 47.5, seq=2))
        chosen = fan.current_directives()
        assert chosen is not None
        assert (chosen.be_cpu_quota_m, chosen.ttl_s) == (40_000, 60.0)
        follower_answer = fan.reporters[urls[1]].directives
        assert follower_answer is not None and follower_answer.ttl_s == 0.0
        # Leadership moves: the new leader answers what it decided from the same reports.
        leader.leader.clear()
        follower.leader.set()
        clock.advance(5.0)
        await send(colocated("node-a", 47.5, seq=3))
        chosen = fan.current_directives()
        assert chosen is not None and chosen.be_cpu_quota_m == 40_000
        assert chosen is fan.reporters[urls[1]].directives  # from the new leader
        old = fan.reporters[urls[0]].directives
        assert old is not None and old.ttl_s == 0.0
    finally:
        await fan.stop()
