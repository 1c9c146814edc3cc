"""HTTP listeners that slow or numerous clients cannot starve: every server Stowage runs.

aiohttp's own sites (``web.TCPSite``) bound neither the time a client may take to send a
request nor how many connections it may hold open: a few hundred connections that send a
header byte every few seconds hold their file descriptors forever, and once the process
runs out, new connections — agents' reports, the scheduler's calls — are reset. aiohttp
has no setting for either; servers that have them (uvicorn's ``limit_concurrency``,
hypercorn's timeouts) would mean leaving aiohttp, whose applications, middlewares and test
tools the coordinator and agent are built on. So a :class:`Listener` keeps aiohttp's own
HTTP/1 protocol (:class:`~aiohttp.web_protocol.RequestHandler`, subclassed to hook its
connection and data events) and its own accept loop, and adds three bounds:

* **A read deadline per request** (``read_timeout_s``), armed when the connection is
  accepted (its first request) or when the first byte of a later request arrives, and
  disarmed only when the request's body has been received whole. It is a *total*: bytes
  trickling in never push it back (as Go's ``http.Server.ReadTimeout``, not an idle
  timer). When it passes the connection is closed, and a handler still waiting for the
  body is cancelled — a request read only in part changes nothing. The time a handler
  takes once the body is in is not bounded here: that is the handler's business. (The
  start of a pipelined request that arrives in the same read as the end of the previous
  body arms no deadline until its next bytes; if none come, the idle timeout below
  closes the connection.)
* **An idle timeout between requests** (``keepalive_timeout_s``, aiohttp's own): a
  keep-alive connection with no new request is closed after it. It must outlast the
  clients' own keep-alive (aiohttp's client: 15 s, Go's: 90 s), or a client may send on a
  connection the server is closing at that moment.
* **A cap on open connections** (``max_connections``). Above it the listener stops
  accepting: new connections wait in the kernel's accept queue and are served as soon as
  an open one closes — and slow ones are closed within ``read_timeout_s``. Waiting rather
  than refusing keeps legitimate clients served through an attack (their call is late by
  at most about one read deadline, instead of failing outright, and agents and
  kube-scheduler would otherwise count a refusal as an outage); the cap itself keeps the
  process's file descriptors for what it needs besides (the API server, its files).
  :func:`fit_connections` raises the process's open-file limit to make room for the cap,
  or says how many connections fit when the hard limit is lower.

TLS is optional (an :class:`ssl.SSLContext`, see :func:`server_tls`); the handshake has a
deadline of ``read_timeout_s`` of its own, before the first request's, and with a client
CA a client certificate is required (mutual TLS).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import logging
import resource
import socket
import ssl
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from common.errors import ConfigError

log = logging.getLogger(__name__)

ACCEPT_RETRY_S = 1.0
"""Pause after the kernel refused to hand over a connection for want of resources (too
many open files, no buffer space), as asyncio's own servers do: retrying at once would
spin. The connection stays in the accept queue meanwhile."""
RESERVED_FDS = 512
"""File descriptors kept out of the connection cap by :func:`fit_connections`: the
Kubernetes client's connections, watches, log and config files, the event loop's own."""
FULL_WARNING_EVERY_S = 60.0
"""At most one warning this often that the cap is reached: under a sustained attack every
freed slot fills again at once, and a line for each would flood the log."""
BACKLOG = 1024
"""The accept queue: connections waiting while the cap is reached (the kernel further
limits it to ``net.core.somaxconn``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The bounds of one listener (see the module docstring for their meaning)."""

    read_timeout_s: float = 10.0
    """Longest time to receive one request's headers and body, from the connection's
    accept or the request's first byte. A 1 MiB report takes milliseconds on a cluster
    network; ten seconds leave room for a congested one."""
    keepalive_timeout_s: float = 120.0
    """Longest idle time of a kept-alive connection between two requests: longer than
    aiohttp's (15 s) and Go's (90 s) client keep-alive, so clients close first."""
    max_connections: int = 4096
    """Most connections open at once; more wait in the accept queue."""

    def __post_init__(self) -> None:
        for name in ("read_timeout_s", "keepalive_timeout_s", "max_connections"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name}: must be positive, got {getattr(self, name)}")


def server_tls(cert_file: str, key_file: str, client_ca_file: str | None = None) -> ssl.SSLContext:
    """A server TLS context serving ``cert_file``/``key_file``; with ``client_ca_file``,
    clients must present a certificate that CA signed (the handshake fails otherwise)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"TLS certificate {cert_file} / key {key_file}: {e}") from e
    if client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=client_ca_file)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"TLS client CA {client_ca_file}: {e}") from e
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def fit_connections(wanted: int, reserved: int = RESERVED_FDS) -> int:
    """Raise this process's soft open-file limit so ``wanted`` connections fit beside
    ``reserved`` other descriptors (up to the hard limit, as Go's runtime does at start);
    return how many connections fit — ``wanted``, or fewer when the hard limit is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + reserved
    if soft != resource.RLIM_INFINITY and soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - reserved))


class _Slot:
    """One place under the connection cap, given back exactly once."""

    __slots__ = ("_listener", "_held")

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._listener._released()


class _BoundedHandler(RequestHandler):
    """aiohttp's HTTP/1 protocol with a read deadline per request (module docstring)."""

    def __init__(self, manager: web.Server, *, slot: _Slot, read_timeout_s: float, **kw: Any):
        super().__init__(manager, **kw)
        self._slot = slot
        self._read_timeout_s = read_timeout_s
        self._read_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()  # the first request's clock starts at the accept

    def data_received(self, data: bytes) -> None:
        if data and self._read_deadline is None:
            self._arm()  # the first byte of a new request
        queued = len(self._messages)
        super().data_received(data)
        # Each request parsed now disarms the deadline once its body is in (at once
        # when it has none); until then the deadline stands, however bytes trickle.
        for _, payload in itertools.islice(self._messages, queued, None):
            payload.on_eof(self._disarm)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        super().connection_lost(exc)
        self._slot.release()

    def _arm(self) -> None:
        self._read_deadline = self._loop.call_later(self._read_timeout_s, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        task = self._task_handler  # the connection's task: it also runs the handler
        self.force_close()
        if task is not None:
            task.cancel()  # a handler waiting for the rest of a body ends with it


class Listener:
    """One aiohttp application served on ``host:port`` within ``limits``.

    ``start()`` binds (an :class:`OSError` naming the address if it cannot) and accepts
    until ``stop()``, which also runs the application's cleanup, as ``AppRunner.cleanup``.
    """

    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
        limits: Limits,
        *,
        tls: ssl.SSLContext | None = None,
        shutdown_timeout_s: float = 5.0,
    ) -> None:
        self.app = app
        self.host = host
        self.limits = limits
        self._port = port
        self._tls = tls
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout_s)
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connecting: set[asyncio.Task[None]] = set()
        self._room = asyncio.Event()
        self.open_connections = 0
        """Connections accepted and not yet closed (at most ``limits.max_connections``)."""
        self.waiting = False
        """True while an accepted connection waits for one of the open ones to close."""
        self._warned_at = -FULL_WARNING_EVERY_S

    @property
    def port(self) -> int:
        """The bound port (the one the kernel chose when asked for port 0)."""
        if self._sock is None:
            raise RuntimeError("the listener is not started")
        port: int = self._sock.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        scheme = "https" if self._tls else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        try:
            family = socket.getaddrinfo(self.host, self._port, type=socket.SOCK_STREAM)[0][0]
            sock = socket.create_server((self.host, self._port), family=family, backlog=BACKLOG)
        except OSError as e:
            raise OSError(e.errno, f"{self.host}:{self._port}: {e.strerror or e}") from e
        except UnicodeError as e:  # a host name the IDNA codec refuses
            raise OSError(errno.EINVAL, f"{self.host}:{self._port}: {e}") from e
        sock.setblocking(False)
        self._sock = sock
        await self._runner.setup()
        self._accepting = asyncio.create_task(self._accept(sock), name=f"accept {self.url}")

    async def stop(self) -> None:
        """Stop accepting, close every connection (in-flight requests get
        ``shutdown_timeout_s`` to finish) and run the application's cleanup."""
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
            self._accepting = None
        for task in list(self._connecting):
            task.cancel()
        if self._connecting:
            await asyncio.gather(*self._connecting, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()
        await self._runner.cleanup()

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None
        while True:
            try:
                sock, _ = await loop.sock_accept(listening)
            except OSError as e:
                log.warning("%s: cannot accept a connection: %s", self.url, e.strerror or e)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            try:
                if self.open_connections >= self.limits.max_connections:
                    await self._wait_for_room()
            except BaseException:
                sock.close()
                raise
            self.open_connections += 1
            task = asyncio.create_task(self._connect(sock, server))
            self._connecting.add(task)
            task.add_done_callback(self._connecting.discard)

    async def _wait_for_room(self) -> None:
        now = asyncio.get_running_loop().time()
        if now - self._warned_at >= FULL_WARNING_EVERY_S:
            self._warned_at = now
            log.warning(
                "%s: %d connections open (max_connections); new ones wait until one closes",
                self.url,
                self.open_connections,
            )
        self.waiting = True
        try:
            while self.open_connections >= self.limits.max_connections:
                self._room.clear()
                await self._room.wait()
        finally:
            self.waiting = False

    async def _connect(self, sock: socket.socket, server: web.Server) -> None:
        """Hand an accepted socket to aiohttp (after the TLS handshake, if any)."""
        slot = _Slot(self)
        loop = asyncio.get_running_loop()

        def protocol() -> _BoundedHandler:
            return _BoundedHandler(
                server,
                loop=loop,
                slot=slot,
                read_timeout_s=self.limits.read_timeout_s,
                keepalive_timeout=self.limits.keepalive_timeout_s,
                access_log=None,
            )

        try:
            if self._tls is None:
                await loop.connect_accepted_socket(protocol, sock)
            else:
                await loop.connect_accepted_socket(
                    protocol,
                    sock,
                    ssl=self._tls,
                    ssl_handshake_timeout=self.limits.read_timeout_s,
                )
        except BaseException as e:
            # A failed or timed-out TLS handshake: the protocol never saw the connection.
            sock.close()
            slot.release()
            if not isinstance(e, Exception):
                raise
            log.debug("%s: connection not set up: %s", self.url, e)

    def _released(self) -> None:
        self.open_connections -= 1
        self._room.set()
