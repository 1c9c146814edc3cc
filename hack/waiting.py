"""Waiting for something another process does: a server to answer, a watch to deliver."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.05


def until(check: Callable[[], T | None], what: str, timeout_s: float = 30.0) -> T:
    """Poll ``check`` until it returns something truthy and return that; AssertionError
    naming ``what`` if it never does within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(POLL_S)
