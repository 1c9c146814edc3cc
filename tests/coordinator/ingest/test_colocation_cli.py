"""``stowage colocation`` against a real coordinator's ``/debug/colocation`` over HTTP."""

from __future__ import annotations

import argparse
import asyncio
import io
from typing import Any

from aiohttp import web

from cli import colocation as cli
from coordinator import debug
from coordinator.services import SERVICES
from tests.coordinator.ingest.conftest import IngestRig
from tests.coordinator.ingest.test_ingest_colocation import answer, colocated


async def served(rig: IngestRig, aiohttp_server: Any) -> str:
    app = web.Application()
    app[SERVICES] = rig.services
    debug.add_routes(app)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def ask(url: str, *extra: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(["--coordinator", url, *extra])
    out = io.StringIO()
    code = await asyncio.to_thread(cli.main, args, out)  # the CLI is synchronous
    return code, out.getvalue()


async def test_the_cli_says_why_a_node_is_throttled(rig: IngestRig, aiohttp_server: Any) -> None:
    url = await served(rig, aiohttp_server)
    assert await ask(url) == (0, "no node's best-effort pods are throttled now\n")
    await answer(rig, colocated("node-a", 45.0, seq=1))
    rig.clock.advance(10.0)
    await answer(rig, colocated("node-a", 47.5, seq=2))
    code, text = await ask(url, "--node", "node-a")
    assert code == 0
    assert text == (
        "node-a (pool default): best-effort throttled to 40000m\n"
        "  why: tightened: LS cpu some avg10 47.5% >= 30% for 10s\n"
        "  next: tightens in 10 s if the condition holds\n"
        "  LS stall: 47.5% (ls-pods); LS use 100500m, BE use 80000m of 221500m allocatable;"
        " 2 BE pod(s)\n"
        "  reclaimable for batch: 98850m\n"
    )
    code, listing = await ask(url)
    assert code == 0 and listing == text


async def test_the_cli_names_what_went_wrong(rig: IngestRig, aiohttp_server: Any) -> None:
    url = await served(rig, aiohttp_server)
    assert (await ask(url, "--node", "nope"))[0] == 2
    assert (await ask("http://127.0.0.1:9", "--node", "x"))[0] == 2
    code, text = await ask(url, "--node", "node-a", "--json")
    assert code == 0 and '"be_cpu_quota_m": null' in text
