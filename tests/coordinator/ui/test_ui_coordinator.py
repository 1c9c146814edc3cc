"""``/ui`` on a real coordinator watching the API emulator, with agent reports posted over
HTTP, in headless Chromium: each tile against the coordinator's own ``/debug/nodes``
answer and against the values the reports carried, the filter typed into, and a new
report showing on the page by itself."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start
from tests.coordinator.nodeview.nodeview_rig import seeded
from tests.coordinator.ui.browser import Page
from tests.coordinator.ui.tiles import same

MIB = rig.MIB


async def cluster(api: rig.RecordingKubeApi, start: Start) -> rig.Coordinator:
    """gpu-a (4 A100s, one pod on it), gpu-b (2 H100s) and cpu-d reporting, cpu-c silent."""
    return await seeded(
        api,
        start,
        gpu_nodes={"gpu-a": (4, "A100"), "gpu-b": (2, "H100")},
        cpu_nodes=["cpu-c", "cpu-d"],
        reports={"gpu-a": (1024, 12.5), "gpu-b": (192, 3.0), "cpu-d": (448, 40.0)},
    )


async def debug_nodes(c: rig.Coordinator) -> list[dict[str, Any]]:
    status, text = await c.get_debug("/debug/nodes")
    assert status == 200, text
    nodes: list[dict[str, Any]] = json.loads(text)["nodes"]
    return nodes


async def test_tiles_show_what_the_coordinator_holds_and_what_the_agents_reported(
    api: rig.RecordingKubeApi, start: Start, page: Page
) -> None:
    c = await cluster(api, start)
    await page.open(c.debug_url + "/ui")
    await page.loaded(4)
    tiles = {t["data-node"]: t for t in await page.tiles()}
    answer = await debug_nodes(c)  # asked after the page did: ages are no smaller
    assert sorted(tiles) == [n["name"] for n in answer] == ["cpu-c", "cpu-d", "gpu-a", "gpu-b"]
    for node in answer:
        tile = dict(tiles[node["name"]])
        if node["age_s"] is not None:
            assert 0 <= float(tile.pop("data-age-s")) <= node["age_s"]
        assert same(tile, {**node, "age_s": None}), (tile, node)

    # The values the reports and the Node objects carried, as sent.
    a, b, c_, d = tiles["gpu-a"], tiles["gpu-b"], tiles["cpu-c"], tiles["cpu-d"]
    assert (a["data-gpu-model"], a["data-gpus"], a["data-gpu-free-milli"]) == ("A100", "4", "3000")
    assert (b["data-gpu-model"], b["data-gpus"], b["data-gpu-free-milli"]) == ("H100", "2", "2000")
    assert float(a["data-psi-cpu"]) == 12.5 and float(d["data-psi-cpu"]) == 40.0
    assert float(b["data-psi-cpu"]) == 3.0
    # contiguity: the share of free memory in 2 MiB blocks (the report adds 64 MiB of smaller)
    assert float(a["data-contiguity"]) == pytest.approx(1024 / 1088)
    assert float(b["data-contiguity"]) == 0.75 and float(d["data-contiguity"]) == 0.875
    assert float(a["data-fullness"]) == 0.5  # 4 of 8 CPUs, the fullest resource
    for reported in (a, b, d):
        assert (reported["data-stale"], reported["data-reporting"]) == ("false", "true")
    assert (c_["data-stale"], c_["data-reporting"]) == ("true", "false")
    assert "data-psi-cpu" not in c_ and "data-age-s" not in c_ and "data-gpu-model" not in c_
    assert page.errors() == []  # the page ran under the coordinator's CSP


async def test_the_filter_narrows_the_tiles_of_a_real_coordinator(
    api: rig.RecordingKubeApi, start: Start, page: Page
) -> None:
    c = await cluster(api, start)
    await page.open(c.debug_url + "/ui")
    await page.loaded(4)
    await page.type("filter", "h100")
    assert await page.shown() == ["gpu-b"]
    await page.open(c.debug_url + "/ui")
    await page.loaded(4)
    await page.click("#stale-only")
    assert await page.shown() == ["cpu-c"]
    await page.click("#stale-only")
    await page.click("#gpu-only")
    assert await page.shown() == ["gpu-a", "gpu-b"]
    assert await page.text("counts") == "2 shown / 4 nodes · 1 stale · 0 throttled"


async def test_a_new_report_shows_on_the_page_without_a_reload(
    api: rig.RecordingKubeApi, start: Start, page: Page
) -> None:
    c = await cluster(api, start)
    await page.open(c.debug_url + "/ui#every=1")
    await page.loaded(4)
    report = rig.node_report("cpu-c", free_2mib_b=192 * MIB, cpu_pressure_pct=20.0)
    assert (await c.report(report, api.agent_token("cpu-c")))[0] == 200
    await page.until(
        "const t = document.querySelector('[data-node=\"cpu-c\"]');"
        "return t.dataset.psiCpu === '20' && t.dataset.stale === 'false';",
        "cpu-c's report on the page",
    )
    tile = {t["data-node"]: t for t in await page.tiles()}["cpu-c"]
    assert float(tile["data-contiguity"]) == 0.75 and tile["data-reporting"] == "true"
