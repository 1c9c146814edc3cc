"""``GET /debug/nodes`` on a real coordinator watching the API emulator, with a report
posted over HTTP: every node has a tile, reported or not, each value the one worked out
here by hand from the objects and the report; filter and limit; bad parameters refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start
from tests.coordinator.nodeview.nodeview_rig import two_nodes


async def nodes(c: rig.Coordinator, **params: str) -> dict[str, Any]:
    status, text = await c.get_debug("/debug/nodes", **params)
    assert status == 200, text
    answer: dict[str, Any] = json.loads(text)
    return answer


async def test_every_node_has_its_tile_whether_its_agent_reports_or_not(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    c = await two_nodes(api, start)
    answer = await nodes(c)
    assert isinstance(answer["generated_at"], float)
    tiles = {t["name"]: t for t in answer["nodes"]}
    assert [t["name"] for t in answer["nodes"]] == ["cpu-b", "gpu-a"]
    gpu = tiles["gpu-a"]
    age = gpu.pop("age_s")
    assert age is not None and age >= 0
    assert gpu == {
        "name": "gpu-a",
        "gpu_model": "A100",
        "gpus": 4,
        "gpu_free_milli": 3000,
        "fullness": 0.5,  # CPU 4 of 8 (memory 8/64, GPU 1/4)
        # Typical shapes: (6 CPUs, 1 GPU) and (4 CPUs, 1 GPU), half each. The first cannot
        # run on 4 free CPUs: all 3000 idle milli are fragments for it; the second fits.
        "gpu_frag_milli": 1500.0,
        "contiguity": pytest.approx(1024 / 1088),
        "psi_cpu": 12.5,
        "psi_memory": 12.5,
        "throttled": False,
        "throttle_reason": None,
        "gpu_unhealthy": 0,
        "gpu_health": None,
        "mig_free": None,
        "stale": False,
        "reporting": True,
    }
    assert tiles["cpu-b"] == {
        "name": "cpu-b",
        "gpu_model": None,
        "gpus": 0,
        "gpu_free_milli": 0,
        "fullness": 0.0,
        "gpu_frag_milli": None,
        "contiguity": None,
        "psi_cpu": None,
        "psi_memory": None,
        "throttled": False,
        "throttle_reason": None,
        "gpu_unhealthy": 0,
        "gpu_health": None,
        "mig_free": None,
        "stale": True,
        "age_s": None,
        "reporting": False,
    }


async def test_filter_matches_name_or_model_in_any_case_and_limit_bounds_the_answer(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    c = await two_nodes(api, start)
    assert [t["name"] for t in (await nodes(c, filter="a100"))["nodes"]] == ["gpu-a"]
    assert [t["name"] for t in (await nodes(c, filter="CPU-"))["nodes"]] == ["cpu-b"]
    assert (await nodes(c, filter="nothing-like-it"))["nodes"] == []
    assert [t["name"] for t in (await nodes(c, limit="1"))["nodes"]] == ["cpu-b"]
    assert len((await nodes(c, limit="100000"))["nodes"]) == 2


BAD_PARAMETERS = [
    ({"limit": "0"}, "limit: expected a whole number 1..100000, got '0'"),
    ({"limit": "-3"}, "limit: expected a whole number 1..100000, got '-3'"),
    ({"limit": "ten"}, "limit: expected a whole number 1..100000, got 'ten'"),
    ({"limit": "100001"}, "limit: expected a whole number 1..100000, got '100001'"),
    ({"limit": "\uff11"}, "limit: expected a whole number 1..100000, got '\uff11'"),
    ({"limit": "9" * 5000}, "limit: expected a whole number 1..100000, got 5000 characters"),
    ({"filter": "x" * 254}, "filter: at most 253 characters"),
]
"""Zero, negative, words, too many, a full-width digit, more digits than ``int()`` takes."""


async def test_bad_parameters_are_a_400_naming_them(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    c = await two_nodes(api, start)
    for params, error in BAD_PARAMETERS:
        status, text = await c.get_debug("/debug/nodes", **params)
        assert (status, json.loads(text)) == (400, {"error": error}), params
