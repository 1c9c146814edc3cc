"""A minimal coordinator stand-in: accepts agent reports, decodes them with the real codec,
answers with directives. Used by the agent benchmark and the agent's end-to-end tests.

    sink = ReportSink(keep=True)
    app = sink.app()            # serve it (aiohttp_server, AppRunner …)
    await sink.wait_for(3)      # until three reports arrived
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from common import codec
from common.schema import SCHEMA_VERSION, Directives, NodeReport


class ReportSink:
    """Counts (and optionally keeps) reports; remembers the Authorization headers seen."""

    def __init__(self, *, keep: bool = False, ttl_s: float = 60.0) -> None:
        self.keep = keep
        self.ttl_s = ttl_s
        self.count = 0
        self.reports: list[NodeReport] = []
        self.authorizations: set[str | None] = set()
        self._arrived = asyncio.Condition()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/reports", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        report = codec.decode_report(await request.read())
        self.authorizations.add(request.headers.get("Authorization"))
        reply = Directives(
            schema_version=SCHEMA_VERSION, node=report.node, issued_at=time.time(), ttl_s=self.ttl_s
        )
        async with self._arrived:
            self.count += 1
            if self.keep:
                self.reports.append(report)
            self._arrived.notify_all()
        return web.Response(body=codec.encode(reply), content_type="application/msgpack")

    async def wait_for(self, count: int, timeout_s: float = 60.0) -> None:
        """Until ``count`` reports have arrived; TimeoutError after ``timeout_s``."""
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: self.count >= count), timeout_s)
