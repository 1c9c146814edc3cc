"""Reports go whole every N reports and after a failed delivery; in between, pods only when
they changed (else ``unchanged``) and no memory-contiguity detail (``refresh-only``) —
checked on its own and through the reporter against a real aiohttp server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from msgspec import structs

from agent.metrics import AgentMetrics
from agent.reportdelta import REFRESH_ONLY, UNCHANGED, ReportDelta
from agent.reporter import Reporter, ReportError, ReportRejectedError
from agent.settings import ReporterSettings
from common import codec
from common.errors import ConfigError
from common.schema import Absent, MemfragSection, NodeReport, PodsSection
from tests.agent.test_reporter import NODE, make_report
from tests.kit import build_report

WHOLE = "whole"


FULL = build_report(NODE)
"""What the reports here carry besides the pods: the kit's memory contiguity detail."""


def make_pods() -> PodsSection:
    """The kit's report's pods (~30)."""
    assert isinstance(FULL.pods, PodsSection)
    return FULL.pods


def report(seq: int, pods: PodsSection | Absent) -> NodeReport:
    return structs.replace(make_report(seq), pods=pods, memfrag=FULL.memfrag)


def moved(pods: PodsSection) -> PodsSection:
    """The same pods measured later (only the time differs)."""
    return structs.replace(pods, measured_at=pods.measured_at + 10.0)


def one_pod_gone(pods: PodsSection) -> PodsSection:
    return structs.replace(pods, pods=pods.pods[:1])


def send(delta: ReportDelta, r: NodeReport, accepted: bool = True) -> str:
    """What goes out of ``r``'s pods: WHOLE or the absent reason; then its delivery outcome.
    Also checks that the memfrag detail goes exactly with whole reports."""
    sent = delta.outgoing(r)
    if accepted:
        delta.delivered(r, sent)
    else:
        delta.forget()
    assert isinstance(sent.memfrag, MemfragSection) and isinstance(r.memfrag, MemfragSection)
    detail = (sent.memfrag.zones, sent.memfrag.hugepages, sent.memfrag.compaction)
    if sent is r:
        assert detail == (r.memfrag.zones, r.memfrag.hugepages, r.memfrag.compaction)
    else:
        assert detail == (REFRESH_ONLY,) * 3
        assert structs.replace(sent.memfrag, zones=r.memfrag.zones) == structs.replace(
            r.memfrag, hugepages=sent.memfrag.hugepages, compaction=sent.memfrag.compaction
        )  # the summary (nodes) and everything else as measured
    return WHOLE if isinstance(sent.pods, PodsSection) else str(sent.pods)


def test_unchanged_pods_are_said_so_until_they_change_or_the_refresh_is_due():
    delta, pods = ReportDelta(refresh_reports=4), make_pods()
    sent = [send(delta, report(k, moved(pods) if k % 2 else pods)) for k in range(9)]
    assert sent == [WHOLE, UNCHANGED, UNCHANGED, UNCHANGED] * 2 + [WHOLE]
    assert send(delta, report(9, one_pod_gone(pods))) == WHOLE
    assert send(delta, report(10, one_pod_gone(pods))) == UNCHANGED
    assert send(delta, report(11, structs.replace(one_pod_gone(pods), source="kubelet"))) == WHOLE


def test_after_a_failed_or_absent_section_the_next_one_goes_whole():
    delta, pods = ReportDelta(refresh_reports=30), make_pods()
    assert [send(delta, report(0, pods)), send(delta, report(1, pods))] == [WHOLE, UNCHANGED]
    assert send(delta, report(2, pods), accepted=False) == UNCHANGED  # lost on the way
    assert send(delta, report(3, pods)) == WHOLE
    assert send(delta, report(4, Absent("pods-unreachable"))) == "pods-unreachable"
    assert send(delta, report(5, pods)) == WHOLE


@pytest.mark.parametrize("refresh", [0, 1])
def test_a_refresh_of_0_or_1_sends_every_report_whole(refresh: int):
    delta, pods = ReportDelta(refresh_reports=refresh), make_pods()
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
    settings = ReporterSettings(coordinator_url=str(server.make_url("")), refresh_reports=30)
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
    with pytest.raises(ConfigError, match="refresh_reports must be 0..1000000, got -1"):
        ReporterSettings(coordinator_url="http://c", refresh_reports=-1)


def test_changed_pods_go_whole_in_a_report_that_is_not_otherwise():
    delta, pods = ReportDelta(refresh_reports=30), make_pods()
    send(delta, report(0, pods))
    r = report(1, one_pod_gone(pods))
    sent = delta.outgoing(r)
    delta.delivered(r, sent)
    assert sent is not r and sent.pods == r.pods  # pods whole, detail left out
    assert send(delta, report(2, one_pod_gone(pods))) == UNCHANGED  # compared with the new


def test_whole_reports_every_n_even_when_the_pods_change_between():
    delta, pods = ReportDelta(refresh_reports=3), make_pods()
    changing = [pods, one_pod_gone(pods)]
    outgoing = []
    for k in range(7):
        r = report(k, changing[k % 2])
        sent = delta.outgoing(r)
        delta.delivered(r, sent)
        outgoing.append(sent is r)
    assert outgoing == [True, False, False, True, False, False, True]


def test_without_memfrag_or_pods_there_is_nothing_to_leave_out():
    delta = ReportDelta(refresh_reports=30)
    bare = make_report(0)
    delta.delivered(bare, delta.outgoing(bare))
    assert delta.outgoing(make_report(1)) == make_report(1)
