"""Request bodies read under a size cap: one reader for every coordinator endpoint.

Not ``request.read()``: aiohttp caps that at the app's ``client_max_size``, one size for
the whole app, while each route has its own (an agent report is tens of KiB, a scheduler
call in Nodes mode carries every candidate Node, megabytes). A declared
``Content-Length`` above the cap is refused before anything is read; a chunked body, or
one longer than it said, is counted while it is read, so at most the cap plus one chunk
is ever held, and the answer goes out while a client that keeps sending is still at it.

Past the cap :func:`read` raises :class:`BodyTooLargeError`; each endpoint answers it as
413 in its own shape (ingest counts it as ``too_large``, the extender answers
``{"error": …}``).
"""

from __future__ import annotations

from aiohttp import web


class BodyTooLargeError(Exception):
    """A body over its route's cap; the message says how large it was, or that it grew
    past the cap while being read."""


async def read(request: web.Request, limit_b: int) -> bytes:
    """The request's body, or :class:`BodyTooLargeError` once it is over ``limit_b`` bytes."""
    declared = request.content_length
    if declared is not None and declared > limit_b:
        raise BodyTooLargeError(f"body of {declared} bytes exceeds {limit_b} bytes")
    stream = request.content
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.readany():
        size += len(chunk)
        if size > limit_b:
            raise BodyTooLargeError(f"body exceeds {limit_b} bytes")
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
