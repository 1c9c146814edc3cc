"""Opt-in soak and fuzz runs (``pytest -m slow``): minutes, not seconds."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys
from pathlib import Path

import psutil
import pytest

from common import codec
from common.errors import SchemaError
from hack.report_sink import ReportSink
from tests.common.test_codec import make_report, make_sparse_report

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_codec_fuzz_only_ever_raises_schema_error():
    """200 000 random corruptions of valid encodings: decode or SchemaError, nothing else."""
    rng = random.Random(20261129)
    seeds = [codec.encode(make_report()), codec.encode(make_sparse_report())]
    for _ in range(200_000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 8)):
            action = rng.random()
            pos = rng.randrange(len(data))
            if action < 0.6:
                data[pos] = rng.randrange(256)
            elif action < 0.8:
                del data[pos : pos + rng.randint(1, 16)]
            else:
                data[pos:pos] = rng.randbytes(rng.randint(1, 16))
        with contextlib.suppress(SchemaError):
            codec.decode_report(bytes(data))


async def test_agent_memory_is_flat_over_two_thousand_cycles(aiohttp_server):
    """A leak of even 1 KiB per cycle would show as 2 MB here."""
    sink = ReportSink()
    server = await aiohttp_server(sink.app())
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", "agent", "--coordinator", str(server.make_url("")),
        "--interval", "0.05", "--jitter", "0", "--pods-source", "none",
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        watched = psutil.Process(proc.pid)
        await sink.wait_for(200)
        rss_early = watched.memory_info().rss
        await sink.wait_for(2200, timeout_s=600)
        rss_late = watched.memory_info().rss
    finally:
        proc.terminate()
        await proc.wait()
    assert rss_late - rss_early < 2 * 2**20, (rss_early, rss_late)
