"""The test kit: the helpers many test modules need, each defined once.

* :func:`free_port` — a port on 127.0.0.1 nothing listens on (the tools in ``hack/`` use
  the same one, :mod:`hack.ports`);
* :func:`until` — poll from a plain test or a thread until something holds, bounded
  (:mod:`hack.waiting`, shared with the tools);
* :func:`eventually` — the same on the event loop, for what lands from another thread or
  task with no event to wait on (an emulator's store, a reporter's metrics).
* :func:`build_report` — a realistic agent report (an 8-GPU, 2-NUMA node running ~30
  pods, every section filled): the load generator's own (:mod:`hack.loadgen.reports`), so
  what the tests feed the coordinator is what the benchmarks send it.

Both waits are the one time assertion a test makes: it happened before this deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from hack.loadgen.reports import build_report
from hack.ports import free_port
from hack.waiting import until

__all__ = ["build_report", "eventually", "free_port", "until"]

T = TypeVar("T")

TIMEOUT_S = 10.0
"""How long :func:`eventually` waits by default: far longer than anything here takes."""


async def eventually(
    check: Callable[[], T],
    what: str = "the condition",
    timeout_s: float = TIMEOUT_S,
    every_s: float = 0.01,
) -> T:
    """Poll ``check`` on the event loop until it returns something true, and return that;
    AssertionError naming ``what`` after ``timeout_s`` (on the loop's monotonic clock)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        await asyncio.sleep(every_s)
