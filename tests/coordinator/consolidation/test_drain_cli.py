"""``stowage plan --consolidate`` against a real debug app on 127.0.0.1: the nodes the
drain plan frees, each pod's destination, and why the other candidates are not."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from cli import plan as plan_cli
from cli.main import build_parser
from coordinator.consolidation import drainview
from coordinator.consolidation.patrol import Candidate, Patrol
from coordinator.consolidation.view import PATROL
from coordinator.consolidation.windows import BY_NAME, Summary
from coordinator.services import SERVICES
from tests.coordinator.consolidation.drainrig import pod
from tests.coordinator.eviction.evictrig import EvictRig, node


def judged(*names_and_means: tuple[str, float]) -> list[Candidate]:
    window = BY_NAME["1h"]
    return [Candidate(n, Summary(window, mean, mean, 1.0), "under") for n, mean in names_and_means]


async def serve(aiohttp_client: Any, rig: EvictRig, patrol: Patrol) -> tuple[TestClient, str]:
    app = web.Application()
    app[SERVICES] = rig.services()
    app[PATROL] = patrol
    drainview.add_routes(app)
    client = await aiohttp_client(app)
    return client, str(client.make_url("")).rstrip("/")


def cluster() -> tuple[EvictRig, Patrol]:
    rig = EvictRig().nodes(*(node(n, cpu="16", memory="64Gi", gpus=0) for n in ("a", "b", "c")))
    rig.pods(pod("web", node="a", cpu="2"), pod("vip", node="b", priority=10_000))
    rig.pods(pod("filler", node="c", cpu="8"))
    patrol = Patrol(rig.cluster, rig.settings.patrol, rig.clock)
    patrol.judged = judged(("b", 5.0), ("a", 12.5))
    return rig, patrol


async def run(*argv: str) -> int:
    args = build_parser().parse_args(["plan", *argv])
    return await asyncio.to_thread(plan_cli.main, args)


async def test_consolidate_prints_the_nodes_freed_and_why_others_are_not(
    aiohttp_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rig, patrol = cluster()
    held = dict(rig.cluster.held)
    _, url = await serve(aiohttp_client, rig, patrol)
    assert await run("--consolidate", "--coordinator", url) == 0
    out = capsys.readouterr().out
    assert "drain plan: frees 1 of 2 candidate node(s) (shown only: drain.enabled is false)" in out
    assert "  a (new): 1 pod(s) to move\n    - ns/web -> c\n" in out
    assert "not drainable:\n  b: ns/vip is high" in out
    assert rig.cluster.held == held  # nothing moved


async def test_consolidate_as_json_lists_candidates_emptiest_first(
    aiohttp_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rig, patrol = cluster()
    _, url = await serve(aiohttp_client, rig, patrol)
    assert await run("--consolidate", "--json", "--coordinator", url) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["candidates"] == ["b", "a"]
    assert answer["drains"][0]["moves"] == [
        {"pod": "ns/web", "uid": "uid-ns-web", "destination": "c"}
    ]
    assert answer["dry_run"] is True and answer["enabled"] is False


async def test_consolidate_exits_1_with_nothing_to_drain_and_2_on_a_bad_command_line(
    aiohttp_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rig, patrol = cluster()
    patrol.judged = judged(("b", 5.0))
    _, url = await serve(aiohttp_client, rig, patrol)
    assert await run("--consolidate", "--coordinator", url) == 1
    assert "frees 0 of 1" in capsys.readouterr().out
    assert await run("--consolidate", "--node", "a", "--coordinator", url) == 2
    assert "--consolidate takes no --pod or --node" in capsys.readouterr().err
    assert await run("--explain", "--coordinator", url) == 2
    assert "--explain needs --pod" in capsys.readouterr().err
