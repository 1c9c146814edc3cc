"""The event loop the coordinator serves on: uvloop (libuv) rather than asyncio's own.

Every agent report and every scheduler call is one HTTP request, and on the ingest path
the event loop's share of a request (socket reads and writes, callbacks, tasks) is as big
as decoding the report. uvloop does that share in C; aiohttp and the kubernetes client's
threads run on it unchanged. Measured on the ingest benchmark's bare HTTP handler: about
a tenth less CPU per request.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a uvloop event loop."""
    return uvloop.run(main)
