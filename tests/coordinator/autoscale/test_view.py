"""``GET /debug/hints`` and ``stowage top --hints`` on a real debug listener over the
hints of :mod:`tests.coordinator.autoscale.rig` (figures worked out in test_hints.py)."""

from __future__ import annotations

import argparse
import asyncio
import io
from typing import Any

import pytest

from cli import debugask, top
from coordinator import app as coordinator_app
from coordinator.autoscale.board import Board
from coordinator.config import AutoscaleSettings, CoordinatorSettings
from coordinator.services import Services
from tests.coordinator.autoscale.rig import Rig


@pytest.fixture
async def served(aiohttp_server: Any) -> str:
    rig = Rig()
    board = Board(rig.cluster, AutoscaleSettings(), rig.clock)
    board.keep(rig.plan())
    services = Services(
        CoordinatorSettings(),
        rig.clock,
        rig.metrics,
        rig.cluster,
        authenticator=None,  # type: ignore[arg-type]
    )
    server = await aiohttp_server(coordinator_app.make_debug_app(services, hints=board))
    return str(server.make_url("")).rstrip("/")


async def test_the_hints_document_has_each_queue_and_deadlock(served: str) -> None:
    body = await asyncio.to_thread(debugask.ask, served, "/debug/hints", {})
    assert body["computed_at"] == Rig().clock.wall()
    assert body["groups"] == ["karpenter.sh/nodepool:cpu", "karpenter.sh/nodepool:gpu-a100"]
    research = body["hints"][1]
    assert {k: research[k] for k in ("queue", "scale", "group", "nodes", "pending")} == {
        "queue": "research", "scale": True, "group": "karpenter.sh/nodepool:gpu-a100",
        "nodes": 2, "pending": 3,
    }  # fmt: skip
    # cpu in cores, GPUs in units
    assert research["gap"] == {"nvidia.com/gpu": 16.0}
    assert research["demand"] == {"cpu": 40.0, "nvidia.com/gpu": 20.0}
    assert research["room"] == {"cpu": 50.0, "nvidia.com/gpu": 4.0}
    assert research["standard"] == {"cpu": 8.0, "nvidia.com/gpu": 4.0}
    assert [(d["queue"], d["wants"], d["pods"]) for d in body["deadlocks"]] == [
        ("team-c", "karpenter.sh/nodepool=gpu-h100", 1)
    ]


async def test_top_prints_each_queue_s_hint_and_the_deadlocks(served: str) -> None:
    parser = argparse.ArgumentParser()
    top.add_arguments(parser)
    out = io.StringIO()
    args = parser.parse_args(["--coordinator", served, "--hints"])
    assert await asyncio.to_thread(top.main, args, out) == 0
    # Columns: queue 16 wide, nodes to add 3 (right), group 30, what it lacks 18, pending
    # pods 7 (right); the deadlocks below.
    assert out.getvalue() == (
        "3 queues, 2 lacking room, 1 deadlocked; 2 node groups known\n"
        "QUEUE            ADD  NODE GROUP                      LACKING            PENDING\n"
        "batch              2  karpenter.sh/nodepool:cpu       cpu 46                   3\n"
        "research           2  karpenter.sh/nodepool:gpu-a100  nvidia.com/gpu 16        3\n"
        "team-b             -  -                               -                        0\n"
        "DEADLOCKED QUEUE PODS  SELECTING NO KNOWN GROUP\n"
        "team-c              1  karpenter.sh/nodepool=gpu-h100 (e.g. team-c/lost)\n"
    )
