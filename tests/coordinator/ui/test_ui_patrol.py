"""The utilisation patrol's heatmap in ``/ui``, in headless Chromium: drawn from a real
debug listener's ``/debug/patrol`` (the patrol sampled by hand, so every cell's value
and colour is worked out here), the window picked in the page and by the URL, markup in
a node's name kept as text, and a failing answer told without losing the node map."""

from __future__ import annotations

from typing import Any

from tests.coordinator.consolidation.test_patrol_view import BUSY, IDLE, served
from tests.coordinator.ui.browser import Page
from tests.coordinator.ui.test_ui_page import NODES, PATROL, Coordinator, coordinator

__all__ = ["coordinator", "served"]

ROWS_JS = """
return [...document.querySelectorAll('#heatmap .hrow')].map((r) => ({
  node: r.dataset.node,
  candidate: r.dataset.candidate,
  weight: getComputedStyle(r.querySelector('.hname')).fontWeight,
  name: r.querySelector('.hname').textContent,
  pct: [...r.querySelectorAll('.cell')].map((c) => c.dataset.pct === undefined ? null
    : Number(c.dataset.pct)),
  colour: [...r.querySelectorAll('.cell')].map((c) => getComputedStyle(c).backgroundColor),
}));
"""
"""Each heatmap row: its node, candidate flag, name's weight, and each cell's value and
colour as the browser paints it."""

NONE = "rgb(220, 220, 224)"  # --none: unsampled
AT_10 = "rgb(64, 33, 106)"  # 10 %: between the first two stops, 0.4 of the way
AT_80 = "rgb(126, 207, 86)"  # 80 %: between the last two, 0.2 of the way
AT_100 = "rgb(253, 231, 37)"  # the top stop
AT_88_9 = "rgb(182, 218, 64)"  # 88.9 %: 0.556 of the way between the last two


async def rows(page: Page, window: str, count: int) -> list[dict[str, Any]]:
    await page.until(
        "return document.getElementById('patrol').dataset.window === arguments[0]"
        " && document.querySelectorAll('#heatmap .hrow').length === arguments[1]",
        f"the heatmap of {window} with {count} rows",
        window,
        count,
    )
    found: list[dict[str, Any]] = await page.js(ROWS_JS)
    return found


async def test_the_heatmap_is_the_patrol_of_a_real_debug_listener(served: str, page: Page) -> None:
    await page.open(served + "/ui#pw=5m")
    idle, busy = await rows(page, "5m", 2)
    # The idle node sampled at 10 % for nine buckets, the busy one at 80 % for five then
    # 100 % for four; the tenth bucket has just begun and holds no sample.
    assert (idle["node"], idle["name"], idle["candidate"]) == (IDLE, IDLE, "true")
    assert idle["pct"] == [10] * 9 + [None]
    assert idle["colour"] == [AT_10] * 9 + [NONE]
    assert (busy["node"], busy["candidate"]) == (BUSY, "false")
    assert busy["pct"] == [80] * 5 + [100] * 4 + [None]
    assert busy["colour"] == [AT_80] * 5 + [AT_100] * 4 + [NONE]
    assert (idle["weight"], busy["weight"]) == ("700", "400")  # candidates in bold
    assert await page.text("patrol-summary") == (
        "2 nodes over 5m (30 s buckets, oldest left) · 1 under 70 % (consolidation candidates)"
    )
    assert "mean 88.9 % · peak 100 % · 90 % sampled" in await page.text("heatmap")

    # The hour: all nine samples fell in its newest 300 s bucket.
    await page.select("patrol-window", "1h")
    idle, busy = await rows(page, "1h", 2)
    assert idle["pct"] == [None] * 11 + [10] and busy["pct"] == [None] * 11 + [88.9]
    assert busy["colour"] == [NONE] * 11 + [AT_88_9]
    assert "pw=" not in await page.js("return location.hash")  # 1h is the default view
    assert page.errors() == []  # drawn under the page's CSP


async def test_the_window_is_read_from_the_url(coordinator: Coordinator, page: Page) -> None:
    await page.open(coordinator.url + "/ui#pw=1d")
    await page.loaded(len(NODES))
    await page.until("return document.getElementById('patrol').dataset.window === '1h'", "drawn")
    assert coordinator.patrol_asked[0] == "1d"
    assert await page.js("return document.getElementById('patrol-window').value") == "1d"
    coordinator.patrol_asked.clear()
    await page.open(coordinator.url + "/ui#pw=2h")  # no such window: the default
    await page.loaded(len(NODES))
    await page.until("return document.getElementById('patrol').dataset.window", "drawn")
    assert coordinator.patrol_asked[0] == "1h"


async def test_markup_in_a_name_stays_text_and_a_failure_is_told(
    coordinator: Coordinator, page: Page
) -> None:
    row = {"node": "<img src=x id=injected>", "heat": [5.0, None], "mean_pct": 5.0,
           "peak_pct": 5.0, "coverage": 0.5, "candidate": True}  # fmt: skip
    coordinator.patrol = {**PATROL, "nodes": [row]}
    coordinator.queues = [
        {"queue": "<b id=bold>q</b>", "cpu_allocated_h": 2.0, "cpu_used_h": 0.5,
         "gpu_allocated_h": 0.0, "gpu_used_h": 0.0}
    ]  # fmt: skip
    await page.open(coordinator.url + "/ui#every=1")
    (drawn,) = await rows(page, "1h", 1)
    assert drawn["name"] == "<img src=x id=injected>" and drawn["pct"] == [5, None]
    await page.until("return document.querySelectorAll('#queue-rows tr').length === 1", "a queue")
    assert await page.js("return document.querySelector('#queue-rows td').textContent") == (
        "<b id=bold>q</b>"
    )
    assert await page.js("return document.querySelectorAll('#injected, #bold').length") == 0

    coordinator.patrol = {"error": "not ready (test)"}
    await page.until(
        "return document.getElementById('patrol-status').classList.contains('error')",
        "the patrol's failure told",
    )
    assert await page.text("patrol-status") == (
        "patrol: coordinator answered HTTP 503: not ready (test)"
    )
    assert len(await page.js(ROWS_JS)) == 1  # the last heatmap stays on screen
    assert len(await page.tiles()) == len(NODES)  # and the node map is untouched
