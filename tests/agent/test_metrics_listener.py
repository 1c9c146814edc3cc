"""The agent's ``/metrics`` listener has the coordinator's bounds on slow clients
(:mod:`common.listener`): a scrape is served, a connection that never finishes its
request is closed at the read deadline, and the defaults stay within a minute."""

from __future__ import annotations

import asyncio

import aiohttp

from agent import metrics as agent_metrics
from common.listener import Limits

WAIT_S = 5.0


async def test_metrics_are_served_and_a_stalled_scraper_is_cut_off() -> None:
    metrics = agent_metrics.AgentMetrics()
    metrics.reports_sent.inc()
    site = await agent_metrics.serve(metrics, "127.0.0.1", 0, Limits(read_timeout_s=0.3))
    try:
        timeout = aiohttp.ClientTimeout(total=WAIT_S)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"http://127.0.0.1:{site.port}/metrics") as response,
        ):
            assert response.status == 200
            assert "stowage_agent_reports_sent_total 1.0" in await response.text()

        reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
        writer.write(b"GET /metrics HTTP/1.1\r\nX-Never-Ends: ")
        assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
        writer.close()
    finally:
        await site.stop()


def test_the_default_bounds_close_a_stalled_connection_within_a_minute() -> None:
    limits = agent_metrics.METRICS_LIMITS
    assert limits.read_timeout_s <= 60
    assert limits.max_connections < 1024 - 64  # room under the commonest open-file limit
