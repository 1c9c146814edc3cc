"""The ``/ui`` page in headless Chromium, against a real HTTP server on 127.0.0.1 that
serves it (``coordinator.ui``) next to a ``/debug/nodes`` answer the test writes: every
tile against the node it was given, the filter typed into and set by the URL, the
colour scale, the polling, markup in values, and 2,000 nodes."""

from __future__ import annotations

import re
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from coordinator import ui
from tests.coordinator.ui.browser import Page
from tests.coordinator.ui.tiles import same

NODES: list[dict[str, Any]] = [
    {"name": "cpu-01", "gpu_model": None, "gpus": 0, "gpu_free_milli": 0, "fullness": 0.5,
     "gpu_frag_milli": None, "contiguity": 0.33, "psi_cpu": 7.5, "psi_memory": 1.0,
     "throttled": False, "throttle_reason": None, "gpu_unhealthy": 0, "gpu_health": None,
     "stale": False, "age_s": 2.0,
     "reporting": True},
    {"name": "cpu-02", "gpu_model": None, "gpus": 0, "gpu_free_milli": 0, "fullness": 0.0,
     "gpu_frag_milli": None, "contiguity": None, "psi_cpu": None, "psi_memory": None,
     "throttled": False, "throttle_reason": None, "gpu_unhealthy": 0, "gpu_health": None,
     "stale": True, "age_s": None,
     "reporting": False},
    {"name": "gpu-a100-01", "gpu_model": "NVIDIA-A100-SXM4-80GB", "gpus": 8,
     "gpu_free_milli": 2500, "fullness": 0.75, "gpu_frag_milli": 1250.5, "contiguity": 0.62,
     "psi_cpu": 3.25, "psi_memory": 0.0, "throttled": False, "throttle_reason": None,
     "gpu_unhealthy": 1, "gpu_health": "GPU 3: XID 79 40s ago",
     "stale": False, "age_s": 1.5, "reporting": True},
    {"name": "gpu-a100-02", "gpu_model": "NVIDIA-A100-SXM4-80GB", "gpus": 8,
     "gpu_free_milli": 8000, "fullness": 0.125, "gpu_frag_milli": 0.0, "contiguity": 0.9,
     "psi_cpu": 41.0, "psi_memory": 12.5, "throttled": True,
     "throttle_reason": "LS stall 41 % >= 30 % for 10 s", "gpu_unhealthy": 0, "gpu_health": None,
     "stale": False, "age_s": 0.25,
     "reporting": True},
    {"name": "gpu-v100-01", "gpu_model": "Tesla-V100-SXM2-16GB", "gpus": 4,
     "gpu_free_milli": 0, "fullness": 1.0, "gpu_frag_milli": None, "contiguity": None,
     "psi_cpu": None, "psi_memory": None, "throttled": False, "throttle_reason": None,
     "gpu_unhealthy": 0, "gpu_health": None, "stale": True, "age_s": 95.0, "reporting": True},
]  # fmt: skip
"""Every kind of node: without GPUs, never reported, throttled, stale, signals missing."""

PATROL: dict[str, Any] = {
    "window": {"name": "1h", "bucket_s": 300.0, "buckets": 12},
    "threshold_pct": 70.0,
    "nodes": [],
}
"""The patrol's answer beside them (no node sampled yet, unless a test says otherwise)."""

TOP_COLOUR = "rgb(253, 231, 37)"
BOTTOM_COLOUR = "rgb(68, 1, 84)"


@dataclass
class Coordinator:
    """What ``/debug/nodes`` answers now (``nodes`` or an error status), and the page."""

    url: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=lambda: [dict(n) for n in NODES])
    status: int = 200
    asked: int = 0
    runner: web.AppRunner | None = None
    patrol: dict[str, Any] = field(default_factory=lambda: dict(PATROL))
    patrol_asked: list[str] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
async def coordinator() -> AsyncIterator[Coordinator]:
    served = Coordinator()

    async def nodes(request: web.Request) -> web.Response:
        served.asked += 1
        if served.status != 200:
            return web.json_response({"error": "not ready (test)"}, status=served.status)
        return web.json_response({"generated_at": 1_800_000_000.0, "nodes": served.nodes})

    app = web.Application()
    ui.add_routes(app)

    async def patrol(request: web.Request) -> web.Response:
        served.patrol_asked.append(request.query.get("window", ""))
        status = 503 if "error" in served.patrol else 200
        return web.json_response(served.patrol, status=status)

    app.router.add_get("/debug/nodes", nodes)

    async def queues(request: web.Request) -> web.Response:
        window = {"name": "1h", "span_s": 3600.0}
        return web.json_response({"window": window, "queues": served.queues})

    async def hints(request: web.Request) -> web.Response:  # none worked out yet
        return web.json_response({"computed_at": None, "groups": [], "hints": [], "deadlocks": []})

    app.router.add_get("/debug/patrol", patrol)
    app.router.add_get("/debug/patrol/queues", queues)
    app.router.add_get("/debug/hints", hints)
    served.runner = runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    served.url = f"http://{host}:{port}"
    yield served
    await runner.cleanup()


async def test_each_tile_carries_every_value_of_its_node(
    coordinator: Coordinator, page: Page
) -> None:
    await page.open(coordinator.url + "/ui")
    await page.loaded(len(NODES))
    tiles = await page.tiles()
    assert [t["data-node"] for t in tiles] == [n["name"] for n in NODES]
    for tile, node in zip(tiles, NODES, strict=True):
        assert same(tile, node), (tile, node)
    # Spot checks written out, so the comparison above cannot be vacuous.
    throttled = tiles[3]
    assert throttled["data-throttled"] == "true"
    assert throttled["data-throttle-reason"] == "LS stall 41 % >= 30 % for 10 s"
    assert throttled["data-gpu-free-milli"] == "8000"
    assert throttled["data-psi-cpu"] == "41"
    assert "data-contiguity" not in tiles[1] and tiles[1]["data-reporting"] == "false"
    assert tiles[4]["data-stale"] == "true" and tiles[4]["data-age-s"] == "95"
    assert await page.text("counts") == "5 shown / 5 nodes · 2 stale · 1 throttled"
    assert tiles[2]["data-gpu-health"] == "GPU 3: XID 79 40s ago"
    # Marks the eye sees: throttled tiles framed, stale ones faded, unhealthy GPUs dashed.
    marks = await page.js(
        "return [...document.querySelectorAll('#grid .tile')].map((t) => getComputedStyle(t))"
        "  .map((s) => [s.boxShadow !== 'none', Number(s.opacity) < 1,"
        "    s.outlineStyle === 'dashed']);"
    )
    assert marks == [[n["throttled"], n["stale"], bool(n["gpu_unhealthy"])] for n in NODES]
    assert page.errors() == []


async def test_typing_in_the_filter_box_narrows_the_tiles_and_the_toggles_combine(
    coordinator: Coordinator, page: Page
) -> None:
    await page.open(coordinator.url + "/ui")
    await page.loaded(len(NODES))
    await page.type("filter", "A100")  # the model and the name, whatever the case
    assert await page.shown() == ["gpu-a100-01", "gpu-a100-02"]
    assert await page.text("counts") == "2 shown / 5 nodes · 2 stale · 1 throttled"
    assert "q=A100" in await page.js("return location.hash")

    await page.open(coordinator.url + "/ui")
    await page.loaded(len(NODES))
    await page.type("filter", "tesla")  # only the V100's model says so
    assert await page.shown() == ["gpu-v100-01"]

    await page.open(coordinator.url + "/ui")
    await page.loaded(len(NODES))
    await page.click("#stale-only")
    assert await page.shown() == ["cpu-02", "gpu-v100-01"]
    await page.click("#gpu-only")
    assert await page.shown() == ["gpu-v100-01"]
    await page.click("#stale-only")
    assert await page.shown() == ["gpu-a100-01", "gpu-a100-02", "gpu-v100-01"]
    await page.click("#throttled-only")
    assert await page.shown() == ["gpu-a100-02"]
    await page.type("filter", "cpu")
    assert await page.shown() == []
    assert await page.text("counts") == "0 shown / 5 nodes · 2 stale · 1 throttled"


async def test_the_url_carries_the_filter_so_a_link_opens_the_same_view(
    coordinator: Coordinator, page: Page
) -> None:
    await page.open(coordinator.url + "/ui#q=cpu&stale=1")
    await page.loaded(len(NODES))
    assert await page.shown() == ["cpu-02"]
    assert await page.js("return document.getElementById('filter').value") == "cpu"
    assert await page.js("return document.getElementById('stale-only').checked") is True
    assert await page.js("return document.getElementById('gpu-only').checked") is False

    # What the fragment cannot mean is the default view, not a broken page.
    await page.open(coordinator.url + "/ui#by=toString&every=0&stale=yes")
    await page.loaded(len(NODES))
    assert len(await page.shown()) == len(NODES)
    assert await page.js("return document.getElementById('signal').value") == "fullness"
    assert page.errors() == []
    # Beyond setTimeout's 24.8 days the delay would be none: polled in a tight loop.
    for every, meant in (("3000000", 5), ("3600", 3600), ("1e400", 5), ("-1", 5)):
        await page.open(coordinator.url + f"/ui#every={every}")
        assert await page.js("return state.every") == meant, every


async def test_tiles_are_coloured_by_the_chosen_signal(
    coordinator: Coordinator, page: Page
) -> None:
    colours = (
        "return [...document.querySelectorAll('#grid .tile')].map((t) => t.style.backgroundColor)"
    )
    await page.open(coordinator.url + "/ui")
    await page.loaded(len(NODES))
    by_fullness = dict(zip(await page.shown(), await page.js(colours), strict=True))
    assert by_fullness["gpu-v100-01"] == TOP_COLOUR  # fullness 1.0
    assert by_fullness["cpu-02"] == BOTTOM_COLOUR  # fullness 0.0
    assert len(set(by_fullness.values())) == 5

    await page.select("signal", "psi_cpu")
    by_psi = dict(zip(await page.shown(), await page.js(colours), strict=True))
    assert by_psi["gpu-a100-02"] == TOP_COLOUR  # 41 %, the most; the scale tops there
    assert by_psi["cpu-02"] == "" and by_psi["gpu-v100-01"] == ""  # no value: no colour
    assert await page.text("scale-hi") == "41"
    assert "by=psi_cpu" in await page.js("return location.hash")

    await page.select("signal", "contiguity")
    by_contiguity = dict(zip(await page.shown(), await page.js(colours), strict=True))
    assert by_contiguity["gpu-a100-02"] != by_psi["gpu-a100-02"]
    assert by_contiguity["gpu-v100-01"] == ""


async def test_the_page_polls_and_says_when_the_coordinator_fails(
    coordinator: Coordinator, page: Page
) -> None:
    await page.open(coordinator.url + "/ui#every=1")
    await page.loaded(len(NODES))
    await page.js("document.querySelector('[data-node=\"cpu-01\"]').seen = true")
    coordinator.nodes[0] = {**NODES[0], "fullness": 0.875, "throttled": True, "psi_cpu": None}
    coordinator.nodes.append({**NODES[1], "name": "cpu-03"})
    await page.loaded(len(NODES) + 1)
    tiles = {t["data-node"]: t for t in await page.tiles()}
    assert same(tiles["cpu-01"], coordinator.nodes[0])  # a value gone is an attribute gone
    assert tiles["cpu-01"]["data-fullness"] == "0.875"
    # The same element, changed in place: a tooltip being read stays open.
    assert await page.js("return document.querySelector('[data-node=\"cpu-01\"]').seen")
    coordinator.nodes.pop()  # gone from the end
    await page.loaded(len(NODES))
    assert "cpu-03" not in await page.shown()
    del coordinator.nodes[1]  # and from the middle
    await page.loaded(len(NODES) - 1)
    assert await page.shown() == ["cpu-01", "gpu-a100-01", "gpu-a100-02", "gpu-v100-01"]

    coordinator.status = 503
    await page.until(
        "return document.getElementById('status').classList.contains('error')", "an error shown"
    )
    assert (await page.text("status")).startswith("coordinator answered HTTP 503: not ready")
    assert len(await page.tiles()) == len(NODES) - 1  # the last answer stays on screen

    coordinator.status = 200
    await page.until(
        "return !document.getElementById('status').classList.contains('error')", "error gone"
    )

    assert coordinator.runner is not None
    await coordinator.runner.cleanup()  # gone: nothing answers any more
    await page.until(
        "return document.getElementById('status').classList.contains('error')", "an error shown"
    )
    assert (await page.text("status")).startswith("coordinator unreachable (showing ")
    assert len(await page.tiles()) == len(NODES) - 1


async def test_clicking_a_tile_shows_its_values_and_markup_stays_text(
    coordinator: Coordinator, page: Page
) -> None:
    coordinator.nodes = [
        {**NODES[3], "gpu_model": "<img src=x id=injected>", "throttle_reason": "<b>why</b>"}
    ]
    await page.open(coordinator.url + "/ui")
    await page.loaded(1)
    await page.click("#grid .tile")
    detail = await page.text("detail")
    assert detail.startswith("gpu-a100-02\n")
    assert "gpu_model <img src=x id=injected>" in detail
    assert "throttle_reason <b>why</b>" in detail
    assert "psi_memory 12.5" in detail
    assert await page.js("return document.querySelectorAll('#injected, b').length") == 0


async def test_two_thousand_nodes_are_two_thousand_tiles_in_view(
    coordinator: Coordinator, page: Page
) -> None:
    coordinator.nodes = [
        {**NODES[i % len(NODES)], "name": f"node-{i:04d}", "fullness": i / 1999}
        for i in range(2000)
    ]
    await page.open(coordinator.url + "/ui")
    await page.loaded(2000)
    tiles = await page.tiles()
    assert [t["data-node"] for t in tiles] == [f"node-{i:04d}" for i in range(2000)]
    assert float(tiles[1999]["data-fullness"]) == 1.0
    # Compact enough to read: every tile at least 12 px square, none wider than the window.
    sizes = await page.js(
        "const r = [...document.querySelectorAll('#grid .tile')]"
        "  .map((t) => t.getBoundingClientRect());"
        "return [Math.min(...r.map((b) => b.width)), Math.min(...r.map((b) => b.height)),"
        " Math.max(...r.map((b) => b.right)), window.innerWidth];"
    )
    assert sizes[0] >= 12 and sizes[1] >= 12 and sizes[2] <= sizes[3]
    await page.type("filter", "node-19")
    assert len(await page.shown()) == 100
    assert await page.text("counts") == "100 shown / 2000 nodes · 800 stale · 400 throttled"


async def test_the_page_is_self_contained() -> None:
    app = web.Application()
    ui.add_routes(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://{host}:{port}/ui") as response,
        ):
            assert response.status == 200
            assert response.content_type == "text/html"
            policy = response.headers["Content-Security-Policy"]
            page = await response.text()
    finally:
        await runner.cleanup()
    assert re.search(r"https?:", page, flags=re.IGNORECASE) is None
    assert re.search(r"\b(src|href)\s*=|@import|url\(|//\w", page) is None
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/]{43}='(;|$)", policy)


def test_the_page_is_installed_with_the_package() -> None:
    """Package data must name the page, or an installed coordinator has no /ui."""
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    assert ui.PAGE in pyproject["tool"]["setuptools"]["package-data"]["coordinator"]
    assert (Path(ui.__file__).parent / ui.PAGE).is_file()
