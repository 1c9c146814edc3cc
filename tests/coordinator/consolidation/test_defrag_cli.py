"""``stowage plan --defrag`` against a real debug app on 127.0.0.1 (``GET /debug/defrag``):
each pending multi-GPU pod's migration — the node it gets, where each moved pod goes — or
why it gets none; bad questions get a clear 4xx; nothing moves."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from cli import plan as plan_cli
from cli.main import build_parser
from coordinator.consolidation import defragview
from coordinator.services import SERVICES
from tests.coordinator.consolidation.drainrig import pod
from tests.coordinator.eviction.evictrig import EvictRig, node, roomy_caps


async def serve(aiohttp_client: Any, rig: EvictRig) -> tuple[TestClient, str]:
    app = web.Application()
    app[SERVICES] = rig.services()
    defragview.add_routes(app)
    client = await aiohttp_client(app)
    return client, str(client.make_url("")).rstrip("/")


def cluster() -> EvictRig:
    """n1 and n2 have 8 GPUs each, 6 and 7 of them free: ns/big (8 GPUs) fits once ns/c
    moves to n1; ns/odd (3 GPUs) fits already."""
    rig = EvictRig(settings=roomy_caps()).nodes(node("n1"), node("n2"))
    rig.pods(*(pod(n, node="n1", gpus=1, priority=1_000) for n in ("a", "b")))
    rig.pods(pod("c", node="n2", gpus=1, priority=1_000))
    rig.pods(pod("big", gpus=8, priority=1_000), pod("odd", gpus=3))
    return rig


async def run(*argv: str) -> int:
    args = build_parser().parse_args(["plan", *argv])
    return await asyncio.to_thread(plan_cli.main, args)


async def test_defrag_prints_each_migration_and_why_other_pods_get_none(
    aiohttp_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rig = cluster()
    held = dict(rig.cluster.held)
    _, url = await serve(aiohttp_client, rig)
    assert await run("--defrag", "--coordinator", url) == 0
    out = capsys.readouterr().out
    assert "migrations: 1 pending pod(s) placed by moving others (shown only:" in out
    assert "  ns/big -> n2: 1 pod(s) to move\n    - ns/c: n2 -> n1\n" in out
    assert "no migration:\n  ns/odd: ns/odd fits on" in out
    assert rig.cluster.held == held  # nothing moved


async def test_defrag_for_one_pod_as_json(
    aiohttp_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rig = cluster()
    _, url = await serve(aiohttp_client, rig)
    assert await run("--defrag", "--pod", "ns/big", "--json", "--coordinator", url) == 0
    answer = json.loads(capsys.readouterr().out)
    (migration,) = answer["migrations"]
    assert migration["moves"] == [
        {"pod": "ns/c", "uid": "uid-ns-c", "from": "n2", "destination": "n1"}
    ]
    assert migration["cost"]["moved"] == 1
    assert answer["refused"] == [] and answer["dry_run"] is True and answer["enabled"] is False


async def test_a_pod_with_no_migration_exits_1(
    aiohttp_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rig = cluster()
    _, url = await serve(aiohttp_client, rig)
    assert await run("--defrag", "--pod", "ns/odd", "--coordinator", url) == 1
    assert "ns/odd fits on" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("query", "status", "said"),
    [("?pod=ns/nope", 404, "is not known"), ("?pod=ns/c", 400, "runs on n2")],
)
async def test_bad_questions_get_a_clear_4xx(
    aiohttp_client: Any, query: str, status: int, said: str
) -> None:
    client, _ = await serve(aiohttp_client, cluster())
    response = await client.get(defragview.PATH + query)
    assert response.status == status
    assert said in (await response.json())["error"]


async def test_defrag_takes_no_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert await run("--defrag", "--node", "n1", "--coordinator", "http://127.0.0.1:9") == 2
    assert "--defrag takes --pod, not --node" in capsys.readouterr().err
