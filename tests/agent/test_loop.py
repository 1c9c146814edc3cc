"""The agent's main loop, as a process, against a real HTTP sink on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

from aiohttp import web

from common import codec
from common.schema import SCHEMA_VERSION, Directives
from tests.hosts import FIXTURES

REPO = Path(__file__).resolve().parents[2]


async def test_agent_loop_reports_until_sigterm(aiohttp_server, tmp_path):
    received = []

    async def reports(request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == "Bearer node-secret"
        report = codec.decode_report(await request.read())
        received.append(report)
        reply = Directives(
            schema_version=SCHEMA_VERSION, node=report.node, issued_at=time.time(), ttl_s=30.0
        )
        return web.Response(body=codec.encode(reply), content_type="application/msgpack")

    app = web.Application()
    app.router.add_post("/v1/reports", reports)
    server = await aiohttp_server(app)
    token = tmp_path / "token"
    token.write_text("node-secret\n")
    root = FIXTURES / "k8s-v2-node"
    args = [
        "--coordinator", str(server.make_url("")), "--token-file", str(token),
        "--node-name", "node-a", "--interval", "0.1", "--jitter", "0.2",
        "--proc-root", str(root / "proc"), "--sys-root", str(root / "sys"),
        "--pods-source", "none",
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", "agent", *args,
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        for _ in range(600):
            if len(received) >= 3:
                break
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    stderr = err.decode()
    assert proc.returncode == 0, stderr
    assert len(received) >= 3
    seqs = [r.seq for r in received]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {r.node for r in received} == {"node-a"}
    # Rates appear from the second report on: the fixture's totals do not move, so 0 %.
    assert received[-1].psi.system.cpu.some.rate_pct == 0.0
    assert "node-secret" not in stderr
