"""Cost per queue in ``/ui``, in headless Chromium, from a real debug listener whose
patrol sampled the cluster of the cost tests: each queue's row against the hours worked
out there by hand."""

from __future__ import annotations

import pytest

from tests.coordinator.consolidation.test_cost import served
from tests.coordinator.ui.browser import Page

__all__ = ["served"]

ROWS_JS = """
return [...document.querySelectorAll('#queue-rows tr')].map((r) =>
  [r.dataset.queue, ...[...r.cells].map((c) => c.textContent)]);
"""


async def test_each_queue_shows_its_hours_and_the_share_used(served: str, page: Page) -> None:
    await page.open(served + "/ui")
    await page.until(
        "return document.getElementById('queues').dataset.window === '1h'"
        " && document.querySelectorAll('#queue-rows tr').length === 3",
        "three queues over 1h",
    )
    # Twelve samples of 30 s (0.1 h): see tests/coordinator/consolidation/test_cost.py.
    assert await page.js(ROWS_JS) == [
        ["research", "research", "0.666", "1", "67 %", "0.2", "0.4", "50 %"],
        ["team-b", "team-b", "1.998", "5", "40 %", "0.1", "0.2", "50 %"],
        ["team-c", "team-c", "0", "0.2", "0 %", "0", "0", "–"],
    ]
    await page.select("patrol-window", "5m")  # the last 9 samples
    await page.until(
        "return document.getElementById('queues').dataset.window === '5m'", "the 5m window"
    )
    research = (await page.js(ROWS_JS))[0]
    # 0.666 × 9/12 = 0.4995 CPU-hours used, sent rounded to 0.001
    assert float(research[2]) == pytest.approx(0.4995, abs=0.001)
    assert research[3:] == ["0.75", "67 %", "0.15", "0.3", "50 %"]
    assert page.errors() == []
