"""The load generator's HTTP/1.1 client against real servers on 127.0.0.1: aiohttp for
what the coordinator answers, a raw asyncio server for answers it must refuse."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from hack.loadgen import http1


@pytest.fixture
async def aiohttp_port() -> AsyncIterator[tuple[int, list[bytes]]]:
    seen: list[bytes] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(await request.read())
        status = int(request.headers.get("X-Status", "200"))
        if request.headers.get("X-Close"):
            return web.Response(status=status, body=b"bye", headers={"Connection": "close"})
        return web.Response(status=status, body=b"\x81\xa2ok\xc3")

    app = web.Application()
    app.router.add_post("/v1/reports", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield site._server.sockets[0].getsockname()[1], seen  # type: ignore[union-attr]
    await runner.cleanup()


def request(port: int, body: bytes, **headers: str) -> bytes:
    prefix = http1.request_prefix("POST", "/v1/reports", f"127.0.0.1:{port}", headers)
    return http1.framed(prefix, body)


async def test_keep_alive_requests_get_their_statuses_and_bodies_arrive_whole(
    aiohttp_port: tuple[int, list[bytes]],
) -> None:
    port, seen = aiohttp_port
    conn = await http1.connect("127.0.0.1", port)
    bodies = [b"a" * 10, b"b" * 100_000, b""]

    statuses = [await conn.request(request(port, b)) for b in bodies]
    statuses.append(await conn.request(request(port, b"x", **{"X-Status": "409"})))

    assert statuses == [200, 200, 200, 409]
    assert seen == [*bodies, b"x"]
    assert not conn.closed
    conn.close()


async def test_connection_close_from_the_server_closes_ours(
    aiohttp_port: tuple[int, list[bytes]],
) -> None:
    port, _ = aiohttp_port
    conn = await http1.connect("127.0.0.1", port)

    assert await conn.request(request(port, b"x", **{"X-Close": "1"})) == 200
    assert conn.closed
    with pytest.raises(ConnectionResetError):
        await conn.request(request(port, b"x"))


async def raw_server(answer: Callable[[bytes], bytes | None]) -> tuple[asyncio.Server, int]:
    """Answers each request's first read with ``answer(data)``; None hangs up instead."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read(65536)
        reply = answer(data)
        if reply is not None:
            writer.write(reply)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "chunked"),
        (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", "without Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"),
        (b"SMTP ready\r\n\r\n", "not an HTTP/1.x status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab", "more bytes"),
    ],
)
async def test_answers_it_does_not_speak_are_errors(reply: bytes, message: str) -> None:
    server, port = await raw_server(lambda _: reply)
    async with server:
        conn = await http1.connect("127.0.0.1", port)
        with pytest.raises(http1.ProtocolError, match=message):
            await conn.request(request(port, b"x"))
        assert conn.closed


async def test_a_hang_up_mid_request_is_a_connection_error() -> None:
    server, port = await raw_server(lambda _: None)
    async with server:
        conn = await http1.connect("127.0.0.1", port)
        with pytest.raises(ConnectionResetError):
            await conn.request(request(port, b"x"))


async def test_a_response_split_across_reads_is_put_together() -> None:
    handled = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        for part in (b"HTTP/1.1 201 Created\r\nCont", b"ent-Length: 4\r\n\r", b"\nab", b"cd"):
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.01)
        await reader.read()  # keep the connection open until the client closes it
        writer.close()
        await writer.wait_closed()
        handled.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        conn = await http1.connect("127.0.0.1", port)
        assert await conn.request(request(port, b"x")) == 201
        assert not conn.closed
        conn.close()
        await handled.wait()


def test_the_request_bytes_are_plain_http() -> None:
    data = request(8080, b"body", Authorization="Bearer t")
    assert data == (
        b"POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer t\r\n"
        b"Content-Length: 4\r\n\r\nbody"
    )
