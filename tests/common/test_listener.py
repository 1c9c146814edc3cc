"""``common.listener``: slow clients are cut off at a total read deadline, idle ones at the
keep-alive timeout, connections past the cap wait for room, and TLS can require client
certificates — each over real sockets on 127.0.0.1, with a plain aiohttp app behind.

Tests wait for the server to close a connection (a read returning EOF) with a generous
client-side timeout as the failure mode; none asserts how long anything took."""

from __future__ import annotations

import asyncio
import errno
import resource
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
from aiohttp import web

from common import listener
from common.errors import ConfigError
from common.listener import Limits, Listener
from tests.kit import eventually as until

SHORT = 0.3
"""The read deadline in these tests (seconds)."""
WAIT_S = 10.0
"""How long a test waits for what must happen (a tenth of it would do)."""
GET = b"GET /hello HTTP/1.1\r\nHost: test\r\n\r\n"


class App:
    """``GET /hello``; ``POST /echo`` reads the body and, if ``slow`` is set, waits after
    reading it for ``slow`` seconds before answering. Records what its handlers saw."""

    def __init__(self) -> None:
        self.slow = 0.0
        self.answered = 0
        self.body_cancelled = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/hello", self.hello)
        app.router.add_post("/echo", self.echo)
        return app

    async def hello(self, request: web.Request) -> web.Response:
        self.answered += 1
        return web.Response(text="hello")

    async def echo(self, request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except asyncio.CancelledError:
            self.body_cancelled.set()
            raise
        await asyncio.sleep(self.slow)
        self.answered += 1
        return web.Response(body=body)


Serve = Callable[..., Awaitable[Listener]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``await serve(app, limits, tls=...)``: a started listener on 127.0.0.1."""
    started: list[Listener] = []

    async def start(
        app: web.Application, limits: Limits, tls: ssl.SSLContext | None = None
    ) -> Listener:
        site = Listener(app, "127.0.0.1", 0, limits, tls=tls)
        await site.start()
        started.append(site)
        return site

    yield start
    for site in started:
        await site.stop()


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), WAIT_S)


async def trickle(writer: asyncio.StreamWriter, every_s: float) -> None:
    """One more header byte every ``every_s`` seconds, until the connection is gone."""
    while not writer.is_closing():
        writer.write(b"X")
        await asyncio.sleep(every_s)


async def response_to(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> bytes:
    """Send ``GET /hello`` on a kept-alive connection and read its whole response."""
    writer.write(GET)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    return head + await asyncio.wait_for(reader.readexactly(length), WAIT_S)


async def test_headers_trickled_faster_than_the_deadline_are_still_cut_off_at_it(
    serve: Serve,
) -> None:
    """The deadline is a total: a byte every third of it never pushes it back."""
    site = await serve(App().app(), Limits(read_timeout_s=SHORT, keepalive_timeout_s=60))
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    writer.write(b"GET /hello HTTP/1.1\r\nX-Slow: ")
    dripping = asyncio.create_task(trickle(writer, SHORT / 3))
    try:
        assert await closed_by_server(reader) == b""
    finally:
        dripping.cancel()
        writer.close()
    await until(lambda: site.open_connections == 0, "the slot given back")


async def test_a_connection_that_sends_nothing_is_closed_at_the_read_deadline(
    serve: Serve,
) -> None:
    site = await serve(App().app(), Limits(read_timeout_s=SHORT, keepalive_timeout_s=60))
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    assert await closed_by_server(reader) == b""
    writer.close()


async def test_a_trickled_body_is_cut_off_and_its_handler_cancelled(serve: Serve) -> None:
    """A handler waiting for the rest of a body is cancelled with the connection: it
    never answers (no 500 for a client that was too slow)."""
    app = App()
    site = await serve(app.app(), Limits(read_timeout_s=SHORT, keepalive_timeout_s=60))
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    writer.write(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\nab")
    dripping = asyncio.create_task(trickle(writer, SHORT / 3))
    try:
        assert await closed_by_server(reader) == b""
        await asyncio.wait_for(app.body_cancelled.wait(), WAIT_S)
    finally:
        dripping.cancel()
        writer.close()
    assert app.answered == 0


async def test_a_handler_slower_than_the_deadline_answers_once_the_body_is_in(
    serve: Serve,
) -> None:
    """The deadline bounds reading the request, not the handler's work after it."""
    app = App()
    app.slow = 3 * SHORT
    site = await serve(app.app(), Limits(read_timeout_s=SHORT, keepalive_timeout_s=60))
    timeout = aiohttp.ClientTimeout(total=WAIT_S)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(f"{site.url}/echo", data=b"payload") as response,
    ):
        assert (response.status, await response.read()) == (200, b"payload")


async def test_the_next_request_on_a_kept_alive_connection_has_its_own_deadline(
    serve: Serve,
) -> None:
    site = await serve(App().app(), Limits(read_timeout_s=SHORT, keepalive_timeout_s=60))
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    assert (await response_to(writer, reader)).endswith(b"hello")
    assert (await response_to(writer, reader)).endswith(b"hello")
    writer.write(b"GET /hello HTTP/1.1\r\nX-Never-Ends: ")
    assert await closed_by_server(reader) == b""
    writer.close()


async def test_an_idle_kept_alive_connection_is_closed_at_the_keepalive_timeout(
    serve: Serve,
) -> None:
    site = await serve(App().app(), Limits(read_timeout_s=60, keepalive_timeout_s=SHORT))
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    assert (await response_to(writer, reader)).endswith(b"hello")
    assert await closed_by_server(reader) == b""
    writer.close()


async def test_past_the_cap_a_connection_waits_until_an_open_one_closes(serve: Serve) -> None:
    app = App()
    site = await serve(
        app.app(), Limits(read_timeout_s=60, keepalive_timeout_s=60, max_connections=2)
    )
    held = [await asyncio.open_connection("127.0.0.1", site.port) for _ in range(2)]
    for reader, writer in held:  # both served: both hold a slot
        assert (await response_to(writer, reader)).endswith(b"hello")
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    writer.write(GET)
    await until(lambda: site.waiting, "the third connection waits")
    assert (site.open_connections, app.answered) == (2, 2)

    held[0][1].close()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    assert head.startswith(b"HTTP/1.1 200")
    assert (site.open_connections, app.answered, site.waiting) == (2, 3, False)
    for _, w in (held[1], (reader, writer)):
        w.close()
    await until(lambda: site.open_connections == 0, "every slot given back")


async def test_a_full_listener_warns_once_not_for_every_waiting_connection(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    site = await serve(App().app(), Limits(max_connections=1))
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    assert (await response_to(writer, reader)).endswith(b"hello")
    for _ in range(3):  # each waits, then takes the slot its predecessor gives back
        next_reader, next_writer = await asyncio.open_connection("127.0.0.1", site.port)
        await until(lambda: site.waiting, "the next connection waits")
        writer.close()
        reader, writer = next_reader, next_writer
        assert (await response_to(writer, reader)).endswith(b"hello")
    writer.close()
    warnings = [r for r in caplog.records if "max_connections" in r.getMessage()]
    assert len(warnings) == 1


async def test_a_refused_accept_does_not_stop_the_listener(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of file descriptors, the kernel refuses to hand a connection over: the listener
    pauses and accepts it again instead of dying."""
    loop = asyncio.get_running_loop()
    accept = loop.sock_accept
    refusals = [OSError(errno.EMFILE, "Too many open files")]

    async def refusing(sock: Any) -> Any:
        if refusals:
            raise refusals.pop()
        return await accept(sock)

    monkeypatch.setattr(loop, "sock_accept", refusing)
    monkeypatch.setattr(listener, "ACCEPT_RETRY_S", 0.01)
    site = await serve(App().app(), Limits())
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    assert (await response_to(writer, reader)).endswith(b"hello")
    assert refusals == []
    writer.close()


def test_limits_refuse_what_bounds_nothing() -> None:
    for name in ("read_timeout_s", "keepalive_timeout_s", "max_connections"):
        with pytest.raises(ConfigError, match=name):
            Limits(**{name: 0})


@pytest.fixture
def nofile() -> Any:
    """This process's open-file limits, restored after the test."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield before
    resource.setrlimit(resource.RLIMIT_NOFILE, before)


def test_the_open_file_limit_is_raised_to_fit_the_cap(nofile: tuple[int, int]) -> None:
    soft, hard = nofile
    if hard == resource.RLIM_INFINITY or hard < 300:
        pytest.skip(f"needs a finite hard RLIMIT_NOFILE of at least 300 (it is {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard - 200, hard))
    assert listener.fit_connections(hard - 150, reserved=0) == hard - 150
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard - 150, hard)
    # Past the hard limit: as many as fit beside the reserve.
    assert listener.fit_connections(hard + 1000, reserved=100) == hard - 100
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)


# ------------------------------------------------------------------ TLS


class Pki:
    """A CA, the server's certificate from it, a client certificate from it and one from
    a stranger's CA, as PEM files."""

    def __init__(self, tmp: Path) -> None:
        self.ca = trustme.CA()
        self.ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
        self.ca_file = str(tmp / "ca.pem")
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        server.cert_chain_pems[0].write_to_path(str(tmp / "server.pem"))
        for pem in server.cert_chain_pems[1:]:
            pem.write_to_path(str(tmp / "server.pem"), append=True)
        server.private_key_pem.write_to_path(str(tmp / "server.key"))
        self.cert_file, self.key_file = str(tmp / "server.pem"), str(tmp / "server.key")
        self.client_cert = self.ca.issue_cert("kube-scheduler")
        self.stranger_cert = trustme.CA().issue_cert("kube-scheduler")

    def client(self, cert: trustme.LeafCert | None) -> ssl.SSLContext:
        """A client that checks the server against our CA and presents ``cert``."""
        context = ssl.create_default_context(cafile=self.ca_file)
        if cert is not None:
            cert.configure_cert(context)
        return context


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


async def get(url: str, tls: ssl.SSLContext) -> tuple[int, str]:
    timeout = aiohttp.ClientTimeout(total=WAIT_S)
    connector = aiohttp.TCPConnector(ssl=tls)
    async with (
        aiohttp.ClientSession(timeout=timeout, connector=connector) as session,
        session.get(url) as response,
    ):
        return response.status, await response.text()


async def test_mutual_tls_serves_a_client_with_a_certificate_from_the_ca_only(
    serve: Serve, pki: Pki
) -> None:
    app = App()
    tls = listener.server_tls(pki.cert_file, pki.key_file, pki.ca_file)
    site = await serve(app.app(), Limits(read_timeout_s=WAIT_S), tls=tls)
    assert site.url.startswith("https://")

    assert await get(f"{site.url}/hello", pki.client(pki.client_cert)) == (200, "hello")
    for refused in (None, pki.stranger_cert):
        with pytest.raises(aiohttp.ClientError):
            await get(f"{site.url}/hello", pki.client(refused))
    assert app.answered == 1
    await until(lambda: site.open_connections == 0, "refused handshakes give their slot back")


async def test_tls_without_a_client_ca_serves_any_client(serve: Serve, pki: Pki) -> None:
    tls = listener.server_tls(pki.cert_file, pki.key_file)
    site = await serve(App().app(), Limits(read_timeout_s=WAIT_S), tls=tls)
    assert await get(f"{site.url}/hello", pki.client(None)) == (200, "hello")


async def test_a_stalled_tls_handshake_is_cut_off_at_the_read_deadline(
    serve: Serve, pki: Pki
) -> None:
    tls = listener.server_tls(pki.cert_file, pki.key_file, pki.ca_file)
    site = await serve(App().app(), Limits(read_timeout_s=SHORT), tls=tls)
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)  # plain TCP
    assert await closed_by_server(reader) == b""
    writer.close()
    await until(lambda: site.open_connections == 0, "the slot given back")


def test_unreadable_tls_files_are_a_config_error_naming_the_file(pki: Pki) -> None:
    with pytest.raises(ConfigError, match="missing.pem"):
        listener.server_tls("missing.pem", pki.key_file)
    with pytest.raises(ConfigError, match="client CA .*nope.pem"):
        listener.server_tls(pki.cert_file, pki.key_file, "nope.pem")
