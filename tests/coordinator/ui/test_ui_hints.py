"""Autoscaling hints in ``/ui``, in headless Chromium, from a real debug listener over the
hints of :mod:`tests.coordinator.autoscale.rig`: each queue's row and each deadlock's
against the figures worked out in tests/coordinator/autoscale/test_hints.py."""

from __future__ import annotations

from tests.coordinator.autoscale.test_view import served
from tests.coordinator.ui.browser import Page

__all__ = ["served"]

HINTS_JS = """
return [...document.querySelectorAll('#hint-rows tr')].map((r) =>
  [r.dataset.queue, r.dataset.scale, r.dataset.group, r.dataset.nodes,
   ...[...r.cells].slice(0, 6).map((c) => c.textContent)]);
"""
DEADLOCKS_JS = """
return [...document.querySelectorAll('#deadlock-rows tr')].map((r) =>
  [r.dataset.wants, ...[...r.cells].map((c) => c.textContent)]);
"""


async def test_each_queue_s_hint_and_each_deadlock_is_a_row(served: str, page: Page) -> None:
    await page.open(served + "/ui")
    await page.until(
        "return document.querySelectorAll('#hint-rows tr').length === 3", "three queues' hints"
    )
    assert await page.js(HINTS_JS) == [
        ["batch", "true", "karpenter.sh/nodepool:cpu", "2",
         "batch", "resourcequota", "2", "karpenter.sh/nodepool:cpu", "cpu 46", "3"],
        ["research", "true", "karpenter.sh/nodepool:gpu-a100", "2",
         "research", "volcano-queue", "2", "karpenter.sh/nodepool:gpu-a100",
         "nvidia.com/gpu 16", "3"],
        ["team-b", "false", "", "0", "team-b", "resourcequota", "–", "–", "–", "0"],
    ]  # fmt: skip
    assert await page.js(DEADLOCKS_JS) == [
        ["karpenter.sh/nodepool=gpu-h100", "team-c", "karpenter.sh/nodepool=gpu-h100", "1",
         "team-c/lost", "karpenter.sh/nodepool:cpu, karpenter.sh/nodepool:gpu-a100"],
    ]  # fmt: skip
    assert await page.text("hints-summary") == (
        "2 of 3 queues lack room · 1 deadlocked · 2 node groups known"
    )
    reason = await page.js("return document.querySelector('#hint-rows tr').cells[6].textContent")
    assert reason.endswith("add 2 node(s) of karpenter.sh/nodepool:cpu (cpu 32 each)")
    assert page.errors() == []
