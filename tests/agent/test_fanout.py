"""Reports reach every coordinator replica (real HTTP servers on 127.0.0.1)."""

from __future__ import annotations

import asyncio

from agent.fanout import FanOutReporter, resolve_replicas
from agent.metrics import AgentMetrics
from agent.reporter import Reporter
from agent.settings import ReporterSettings
from common.schema import SCHEMA_VERSION, Absent, Directives, NodeReport
from hack.report_sink import ReportSink
from tests.hosts import FakeClock


def report(seq: int) -> NodeReport:
    absent = Absent("not-measured")
    return NodeReport(
        schema_version=SCHEMA_VERSION, node="node-a", agent_version="t", seq=seq,
        measured_at=1_790_000_000.0 + seq, psi=absent, memfrag=absent, allocatable=absent,
        numa=absent, gpus=absent, usage=absent, pods=absent,
    )  # fmt: skip


async def test_every_replica_gets_every_report(aiohttp_server):
    sinks = [ReportSink(keep=True), ReportSink(keep=True)]
    servers = [await aiohttp_server(s.app()) for s in sinks]
    urls = [str(server.make_url("")).rstrip("/") for server in servers]
    replicas = list(urls)

    async def resolve(url: str) -> list[str]:
        assert url == "http://coordinator.example:8080"
        return list(replicas)

    fan = FanOutReporter(
        ReporterSettings(coordinator_url="http://coordinator.example:8080"),
        metrics=AgentMetrics(), clock=FakeClock(), resolve=resolve, refresh_s=3600,
    )  # fmt: skip
    await fan.start()
    try:
        assert sorted(fan.reporters) == sorted(urls)
        fan.offer(report(1))
        await asyncio.gather(*(s.wait_for(1, timeout_s=10) for s in sinks))
        assert [[r.seq for r in s.reports] for s in sinks] == [[1], [1]]
        assert fan.current_directives() is not None  # both answered; the newest is kept
        # One replica goes away (scaled down): it is dropped, the other keeps receiving.
        replicas.remove(urls[1])
        await fan._refresh()
        assert list(fan.reporters) == [urls[0]]
        fan.offer(report(2))
        await sinks[0].wait_for(2, timeout_s=10)
        assert [r.seq for r in sinks[1].reports] == [1]
    finally:
        await fan.stop()


async def test_resolving_a_name_keeps_scheme_port_and_path():
    urls = await resolve_replicas("http://localhost:8080/base")
    assert urls and all(u.startswith("http://") and u.endswith(":8080/base") for u in urls)
    assert any("127.0.0.1" in u or "[::1]" in u for u in urls)


def test_the_replica_that_decides_a_throttle_wins_over_a_newer_default():
    clock = FakeClock()
    fan = FanOutReporter(
        ReporterSettings(coordinator_url="http://coordinator.example:8080"),
        metrics=AgentMetrics(), clock=clock, resolve=resolve_replicas,
    )  # fmt: skip
    answers = {
        "http://10.0.0.1:8080": Directives(
            schema_version=SCHEMA_VERSION, node="node-a", issued_at=100.0, ttl_s=60.0,
            be_cpu_quota_m=500, be_reason="LS stall 40 % >= 30 % for 10 s",
        ),
        "http://10.0.0.2:8080": Directives(
            schema_version=SCHEMA_VERSION, node="node-a", issued_at=101.0, ttl_s=60.0
        ),
    }  # fmt: skip
    for url, directives in answers.items():
        reporter = Reporter(
            ReporterSettings(coordinator_url=url), metrics=AgentMetrics(), clock=clock
        )
        reporter.directives, reporter.directives_received_at = directives, clock.monotonic()
        fan.reporters[url] = reporter
    chosen = fan.current_directives()
    assert chosen is not None and chosen.be_cpu_quota_m == 500
    # The leader's answer lapses: the default from the other replica is what holds.
    clock.advance(61.0)
    fan.reporters["http://10.0.0.2:8080"].directives_received_at = clock.monotonic()
    chosen = fan.current_directives()
    assert chosen is not None and chosen.be_cpu_quota_m is None
