"""Pods are sent whole only when they changed, after a failed delivery and every N reports;
otherwise the section says ``unchanged`` — checked on its own and through the reporter
against a real aiohttp server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from msgspec import structs

from agent.metrics import AgentMetrics
from agent.podsdelta import UNCHANGED, PodsDelta
from agent.reporter import Reporter, ReportError, ReportRejectedError
from agent.settings import ReporterSettings
from common import codec
from common.errors import ConfigError
from common.schema import Absent, NodeReport, PodsSection
from tests.agent.test_reporter import make_report
from tests.common.test_codec import make_pods

WHOLE = "whole"


def report(seq: int, pods: PodsSection | Absent) -> NodeReport:
    return structs.replace(make_report(seq), pods=pods)


def moved(pods: PodsSection) -> PodsSection:
    """The same pods measured later (only the time differs)."""
    return structs.replace(pods, measured_at=pods.measured_at + 10.0)


def one_pod_gone(pods: PodsSection) -> PodsSection:
    return structs.replace(pods, pods=pods.pods[:1])


def send(delta: PodsDelta, r: NodeReport, accepted: bool = True) -> str:
    """What goes out for ``r``: WHOLE or the absent reason; then its delivery outcome."""
    sent = delta.outgoing(r)
    if accepted:
        delta.delivered(r, sent)
    else:
        delta.forget()
    return WHOLE if isinstance(sent.pods, PodsSection) else str(sent.pods)


def test_unchanged_pods_are_said_so_until_they_change_or_the_refresh_is_due():
    delta, pods = PodsDelta(refresh_reports=4), make_pods()
    sent = [send(delta, report(k, moved(pods) if k % 2 else pods)) for k in range(9)]
    assert sent == [WHOLE, UNCHANGED, UNCHANGED, UNCHANGED] * 2 + [WHOLE]
    assert send(delta, report(9, one_pod_gone(pods))) == WHOLE
    assert send(delta, report(10, one_pod_gone(pods))) == UNCHANGED
    assert send(delta, report(11, structs.replace(one_pod_gone(pods), source="kubelet"))) == WHOLE


def test_after_a_failed_or_absent_section_the_next_one_goes_whole():
    delta, pods = PodsDelta(refresh_reports=30), make_pods()
    assert [send(delta, report(0, pods)), send(delta, report(1, pods))] == [WHOLE, UNCHANGED]
    assert send(delta, report(2, pods), accepted=False) == UNCHANGED  # lost on the way
    assert send(delta, report(3, pods)) == WHOLE
    assert send(delta, report(4, Absent("pods-unreachable"))) == "pods-unreachable"
    assert send(delta, report(5, pods)) == WHOLE


@pytest.mark.parametrize("refresh", [0, 1])
def test_a_refresh_of_0_or_1_sends_the_pods_every_time(refresh: int):
    delta, pods = PodsDelta(refresh_reports=refresh), make_pods()
    assert [send(delta, report(k, pods)) for k in range(3)] == [WHOLE] * 3


async def test_the_reporter_says_unchanged_only_after_the_coordinator_accepted_the_pods(
    aiohttp_server: Any,
):
    received: list[str] = []
    statuses: list[int] = []

    async def handle(request: web.Request) -> web.Response:
        got = codec.decode_report(await request.read())
        received.append(WHOLE if isinstance(got.pods, PodsSection) else str(got.pods))
        return web.Response(status=statuses.pop(0) if statuses else 200)

    app = web.Application()
    app.router.add_post("/v1/reports", handle)
    server = await aiohttp_server(app)
    settings = ReporterSettings(coordinator_url=str(server.make_url("")), pods_refresh_reports=30)
    rep = Reporter(settings, metrics=AgentMetrics())
    pods = make_pods()
    try:
        for seq in range(3):
            await rep.send_once(report(seq, moved(pods)))
        statuses.append(503)
        with pytest.raises(ReportError):
            await rep.send_once(report(3, pods))
        await rep.send_once(report(4, pods))
        statuses.append(400)
        with pytest.raises(ReportRejectedError):
            await rep.send_once(report(5, pods))
        await rep.send_once(report(6, pods))
        await rep.send_once(report(7, pods))
    finally:
        await rep.stop()
    assert received == [WHOLE, UNCHANGED, UNCHANGED, UNCHANGED, WHOLE, UNCHANGED, WHOLE, UNCHANGED]


def test_the_refresh_setting_is_checked():
    with pytest.raises(ConfigError, match="pods_refresh_reports must be 0..1000000, got -1"):
        ReporterSettings(coordinator_url="http://c", pods_refresh_reports=-1)
