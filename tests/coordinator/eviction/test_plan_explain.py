"""``stowage plan --explain`` against a real coordinator app on 127.0.0.1: what would be
evicted now and why, without acting."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from cli import plan as plan_cli
from cli.main import build_parser
from coordinator import debug
from coordinator.live import cooldowns
from coordinator.services import SERVICES
from tests.coordinator.eviction.evictrig import EvictRig, node, pod


async def serve(aiohttp_client: Any, rig: EvictRig) -> tuple[TestClient, str]:
    app = web.Application()
    app[SERVICES] = rig.services()
    debug.add_routes(app)
    client = await aiohttp_client(app)
    return client, str(client.make_url("")).rstrip("/")


def cluster() -> EvictRig:
    rig = EvictRig().nodes(node("gpu-a"))
    notes = {"stowage.io/last-checkpoint": str(rig.clock.wall() - 90)}
    return rig.pods(
        pod("low", node="gpu-a", gpus=8, annotations=notes),
        pod("want", gpus=8, priority=10_000),
        pod("meek", gpus=8, priority=1_000),
    )


async def run(*argv: str) -> int:
    """``stowage plan --explain ARGV`` as the command line parses it (without the logging
    setup of ``cli.main.main``, which would outlive the test)."""
    args = build_parser().parse_args(["plan", "--explain", *argv])
    assert args.run is plan_cli.main
    return await asyncio.to_thread(plan_cli.main, args)


async def test_explain_prints_the_plan_and_changes_nothing(
    aiohttp_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rig = cluster()
    held = dict(rig.cluster.held)
    _, url = await serve(aiohttp_client, rig)
    assert await run("--coordinator", url, "--pod", "ns/want") == 0
    out = capsys.readouterr().out
    assert "preemption for ns/want: would evict 1 pod(s) for node gpu-a" in out
    assert "dry run: evictions.enabled is false" in out
    assert "- ns/low on gpu-a (low, priority 0): makes room for ns/want (high)" in out
    assert "last checkpoint 90 s ago" in out
    assert "no approval needed" in out
    assert rig.cluster.held == held


async def test_explain_says_why_nothing_would_be_evicted(
    aiohttp_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url = await serve(aiohttp_client, cluster())
    assert await run("--coordinator", url, "--pod", "ns/meek", "--json") == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["trigger"] == "preemption"
    assert "may displace only pods 2 levels below" in answer["refusal"]


async def test_explain_names_what_is_wrong_with_the_question(
    aiohttp_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    client, url = await serve(aiohttp_client, cluster())
    assert await run("--coordinator", url, "--pod", "ns/nobody") == 2
    assert "pod ns/nobody is not known (HTTP 404)" in capsys.readouterr().err
    assert await run("--coordinator", url, "--pod", "ns/low") == 2
    assert "only pending pods preempt (HTTP 400)" in capsys.readouterr().err
    resp = await client.get("/debug/plan")
    assert resp.status == 400
    assert "give ?pod=NAMESPACE/NAME" in (await resp.json())["error"]
    assert await run("--coordinator", "http://127.0.0.1:9", "--node", "gpu-a") == 2
    assert "cannot ask http://127.0.0.1:9/debug/plan?node=gpu-a" in capsys.readouterr().err


def test_a_plan_needing_approval_says_how_to_give_it() -> None:
    answer = {
        "trigger": "preemption", "subject": "ns/want", "dry_run": False, "note": "-",
        "plan": {
            "node": "gpu-a", "reason": "r", "queue": "heavy", "needs_approval": True,
            "cost": {"victims": 1, "levels": 1, "work_lost_s": 0, "gang_dragged": 0},
            "victims": [],
        },
    }  # fmt: skip
    assert "  queue heavy: needs approval (kubectl stowage approve ns/want, once proposed)\n" in (
        plan_cli.words(answer)
    )


async def test_explain_applies_the_shared_cooldowns(aiohttp_client: Any) -> None:
    """A queue whose last round evicted (the Lease every replica watches) gets no plan
    here either, whichever replica is asked."""
    rig = cluster()
    wall = rig.clock.wall()
    rig.cluster.cooldowns.observe(cooldowns.value({"ns": wall + 60}, wall))
    client, _ = await serve(aiohttp_client, rig)
    resp = await client.get("/debug/plan", params={"pod": "ns/want"})
    answer = await resp.json()
    assert "queue ns is cooling down" in answer["refusal"]
    rig.clock.advance(60)
    resp = await client.get("/debug/plan", params={"pod": "ns/want"})
    assert (await resp.json())["plan"]["node"] == "gpu-a"
