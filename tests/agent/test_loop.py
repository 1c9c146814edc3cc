"""The agent's main loop, as a process, against a real HTTP sink on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp

from hack.report_sink import ReportSink
from tests.hosts import FIXTURES
from tests.kit import free_port

REPO = Path(__file__).resolve().parents[2]


async def test_agent_loop_reports_until_sigterm(aiohttp_server, tmp_path):
    sink = ReportSink(keep=True)
    server = await aiohttp_server(sink.app())
    token = tmp_path / "token"
    token.write_text("node-secret\n")
    root = FIXTURES / "k8s-v2-node"
    metrics_port = free_port()  # for the agent's /metrics
    args = [
        "--coordinator", str(server.make_url("")), "--token-file", str(token),
        "--node-name", "node-a", "--interval", "0.1", "--jitter", "0.2",
        "--proc-root", str(root / "proc"), "--sys-root", str(root / "sys"),
        "--pods-source", "none", "--metrics-listen", f"127.0.0.1:{metrics_port}",
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", "agent", *args,
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await sink.wait_for(3)
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            exposition = await response.text()
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    stderr = err.decode()
    assert proc.returncode == 0, stderr
    received = sink.reports
    assert len(received) >= 3
    assert sink.authorizations == {"Bearer node-secret"}
    seqs = [r.seq for r in received]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {r.node for r in received} == {"node-a"}
    # Rates appear from the second report on: the fixture's totals do not move, so 0 %.
    assert received[-1].psi.system.cpu.some.rate_pct == 0.0
    assert "node-secret" not in stderr
    assert 'stowage_agent_collector_success{collector="psi"} 1.0' in exposition
    assert 'stowage_agent_collector_success{collector="gpus"} 1.0' in exposition  # absent is normal
    sent = next(
        float(line.split()[1])
        for line in exposition.splitlines()
        if line.startswith("stowage_agent_reports_sent_total ")
    )
    assert sent >= 2
