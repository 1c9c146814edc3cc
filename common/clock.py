"""Time sources, injected wherever TTLs, rates or backoff depend on time.

``wall()`` stamps facts (``measured_at``); ``monotonic()`` measures intervals, because the
wall clock can jump. Tests pass a fake clock instead of patching the ``time`` module.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def wall(self) -> float:
        """Unix seconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...


class SystemClock:
    """The real clocks."""

    def wall(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()
