"""A lean HTTP/1.1 client connection for load generation: one keep-alive TCP connection,
one request in flight, requests written as prepared bytes.

Why not aiohttp's client: on a 2-core machine the load generator shares the machine with
the server it measures, and aiohttp's client spends more CPU per request (~300 µs) than
the coordinator's ingest spends answering it. That CPU, and the cache it sweeps, is taken
from the server and shows up as server cost that a real deployment — agents on other
machines — never pays. This client writes each request with one ``write`` of bytes made
in advance and reads only what it must: the status code and ``Content-Length``. It speaks
exactly what the coordinator answers (``Content-Length`` bodies, keep-alive, or
``Connection: close``) and refuses anything else (chunked bodies) with an error rather
than guessing.
"""

from __future__ import annotations

import asyncio
from typing import Final

_HEAD_END: Final = b"\r\n\r\n"
MAX_HEAD_B: Final = 64 * 1024
"""A response head longer than this is refused: no server of ours sends one."""


class ProtocolError(Exception):
    """The server answered something this client does not speak."""


class Http1Connection(asyncio.Protocol):
    """One keep-alive connection; :meth:`request` sends prepared bytes, returns the status."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[int] | None = None
        self._body_end: int | None = None
        self._status = 0
        self._close_after = False
        self.closed = False

    # ------------------------------------------------------------------ protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(exc or ConnectionResetError("connection closed by the server"))

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            self._fail(ProtocolError("data from the server with no request in flight"))
            return
        self._buffer += data
        try:
            self._parse()
        except ProtocolError as e:
            self._fail(e)

    # ------------------------------------------------------------------ requests

    async def request(self, data: bytes) -> int:
        """Send one whole request (head and body) and wait for the response's status."""
        if self.closed or self._transport is None:
            raise ConnectionResetError("connection is closed")
        if self._waiter is not None:
            raise RuntimeError("one request at a time per connection")
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(data)
        return await self._waiter

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    # ------------------------------------------------------------------ parsing

    def _parse(self) -> None:
        if self._body_end is None:
            end = self._buffer.find(_HEAD_END)
            if end < 0:
                if len(self._buffer) > MAX_HEAD_B:
                    raise ProtocolError(f"response head over {MAX_HEAD_B} bytes")
                return
            self._status, length, self._close_after = _head(bytes(self._buffer[:end]))
            self._body_end = end + len(_HEAD_END) + length
        if len(self._buffer) < self._body_end:
            return
        if len(self._buffer) > self._body_end:
            raise ProtocolError("more bytes than the response's Content-Length")
        self._buffer.clear()
        self._body_end = None
        waiter, self._waiter = self._waiter, None
        if self._close_after:
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result(self._status)

    def _fail(self, exc: BaseException) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()


def _head(head: bytes) -> tuple[int, int, bool]:
    """Status code, Content-Length and whether the server closes after this response."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0]!r}")
    length: int | None = None
    close = version == "HTTP/1.0"
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if name == "content-length":
            if not value.isdigit():
                raise ProtocolError(f"bad Content-Length {value!r}")
            length = int(value)
        elif name == "transfer-encoding":
            raise ProtocolError(f"unsupported Transfer-Encoding {value!r}")
        elif name == "connection":
            close = value.lower() == "close"
    if length is None:
        raise ProtocolError("response without Content-Length")
    return int(code), length, close


async def connect(host: str, port: int) -> Http1Connection:
    """Open a connection (raises ``OSError`` — e.g. ``ConnectionRefusedError`` — on failure)."""
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(Http1Connection, host, port)
    return conn


def request_prefix(method: str, path: str, host: str, headers: dict[str, str]) -> bytes:
    """A request's head up to, not including, its ``Content-Length``: made once per node."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


def framed(prefix: bytes, body: bytes) -> bytes:
    """The whole request: ``prefix``, the body's length, the body."""
    return b"%sContent-Length: %d\r\n\r\n%s" % (prefix, len(body), body)
