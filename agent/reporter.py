"""Delivers node reports to the coordinator and keeps the directives it answers with.

Why it is shaped this way:

* **Newest only.** A report is a snapshot of the node; once a newer one exists the older
  one is worthless to the scheduler. The agent loop drops each report into a single slot
  (:meth:`Reporter.offer`) and a background task delivers whatever the slot holds, so an
  outage never builds a backlog and a returning coordinator hears the present, not a
  replay. A report replaced before delivery counts in ``reports_dropped``.
* **Jittered exponential backoff.** A whole fleet loses the coordinator at the same moment;
  fixed retry times would hit it in lockstep when it returns. See :func:`backoff_delay`.
* **Transient vs. rejected.** Connection errors, timeouts, 5xx, 429 and malformed replies
  can pass, so they are retried (with the newest report). Any other non-2xx answer (400
  schema rejection, 401/403) will not change by resending the same bytes: that report is
  dropped and the next one goes out without delay.
* **Token re-read on every send.** Projected service-account tokens rotate under the agent;
  a cached one would start failing with 401 an hour later.
* **Directives are leases.** They expire ``ttl_s`` after receipt (monotonic clock); then
  :meth:`Reporter.current_directives` returns None and the node falls back to its defaults,
  so a lost coordinator never pins a throttle forever.
* **Whole reports every N** (:mod:`agent.reportdelta`): in between, reports carry
  ``"pods": "unchanged"`` unless the pods changed, and leave out memory-contiguity detail.
* **Quiet logs.** One line when delivery starts failing, one when the cause changes, one on
  recovery; never one per attempt, and never the token.

Errors::

    StowageError
    └── ReportError              one delivery attempt failed; ``cause`` is the metric label
        └── ReportRejectedError  the coordinator refused the report (4xx other than 429)
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Awaitable, Callable
from typing import Final

import aiohttp

from agent.metrics import AgentMetrics
from agent.reportdelta import ReportDelta
from agent.settings import ReporterSettings
from common import codec
from common.clock import Clock, SystemClock
from common.errors import ConfigError, SchemaError, StowageError
from common.files import read_regular
from common.schema import Directives, NodeReport

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
REPORTS_PATH: Final = "/v1/reports"
CONTENT_TYPE: Final = "application/msgpack"
_MAX_REPLY_B: Final = codec.MAX_DIRECTIVES_BYTES
"""Directives encode to ~100 bytes unthrottled and under 30 KiB at most (a 4 KiB reason and
:data:`~common.schema.MAX_BE_PODS` UIDs of 36 bytes); a bigger reply is a misrouted request,
not directives."""
MAX_TOKEN_B: Final = 64 * 1024
"""Largest token file read; a projected service-account token is about 1 KiB."""
MAX_CA_FILE_B: Final = 4 * 2**20
"""Largest CA bundle read; a distribution's whole trust store is about 200 KiB."""


class ReportError(StowageError):
    """One delivery attempt failed; a later attempt (with a newer report) may succeed.

    ``cause`` labels ``report_failures`` and is one of a fixed few (token, network,
    timeout, server, throttled, malformed, rejected), which keeps the metric small."""

    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(detail)
        self.cause = cause


class ReportRejectedError(ReportError):
    """The coordinator answered but refused the report; resending the same bytes won't help."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__("rejected", detail)
        self.status = status


def backoff_delay(failures: int, initial_s: float, max_s: float, rng: random.Random) -> float:
    """Delay after ``failures`` consecutive failures: uniform in [initial, min(max, initial·2^n)].

    Full jitter spreads a fleet's retries; the ceiling doubling per failure spreads them
    wider the longer an outage lasts; the floor keeps a broken coordinator from being
    hammered, and the cap bounds how late a node rejoins once it is back.
    """
    ceiling = min(max_s, initial_s * 2.0 ** min(failures, 64))
    return rng.uniform(initial_s, ceiling)


class Reporter:
    """Owns the HTTP session, the newest-report slot and the last directives received."""

    def __init__(
        self,
        settings: ReporterSettings,
        *,
        metrics: AgentMetrics,
        clock: Clock | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        on_directives: Callable[[], None] | None = None,
    ) -> None:
        if not settings.coordinator_url:
            raise ConfigError("reporter: coordinator_url is not set")
        self._settings = settings
        self._url = settings.coordinator_url.rstrip("/") + REPORTS_PATH
        self._metrics = metrics
        self._clock: Clock = clock or SystemClock()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._slot: NodeReport | None = None
        self._offered = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing: str | None = None
        """Cause of the current failure streak; None while deliveries succeed."""
        self._failures = 0
        """Failed attempts in the current streak: drives the backoff and the recovery line."""
        self._last_rejection: int | None = None
        self._delta = ReportDelta(settings.refresh_reports)
        self._on_directives = on_directives
        """Called after directives arrive (the enforcer acts on them at once, not next cycle)."""
        self.directives: Directives | None = None
        """The latest directives, even past their TTL; readers want :meth:`current_directives`."""
        self.directives_received_at: float | None = None
        """Monotonic time :attr:`directives` arrived; the TTL counts from here."""

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Open the session and start delivering in a named background task."""
        self._open_session()
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="stowage-reporter")
            self._task.add_done_callback(_log_crash)

    async def stop(self) -> None:
        """Cancel delivery and close the session; an undelivered report is abandoned."""
        task, self._task = self._task, None
        try:
            if task is not None:
                task.cancel()
                await asyncio.wait({task})
        finally:
            session, self._session = self._session, None
            if session is not None:
                await session.close()

    # ------------------------------------------------------------------ delivery

    def offer(self, report: NodeReport) -> None:
        """Hand over this cycle's report; it replaces any report not yet delivered."""
        if self._slot is not None:
            self._metrics.reports_dropped.inc()
        self._slot = report
        self._offered.set()

    async def run(self) -> None:
        """Deliver the slot's content forever, backing off while the coordinator fails.

        The backoff sleep is never cut short by a new offer (offers come every cycle and
        would defeat it); after it, the newest report is what gets sent.
        """
        while True:
            while self._slot is None:
                self._offered.clear()
                await self._offered.wait()
            report, self._slot = self._slot, None
            try:
                await self.send_once(report)
            except ReportRejectedError:
                continue
            except ReportError:
                if self._slot is None:
                    self._slot = report
                else:
                    self._metrics.reports_dropped.inc()
                s = self._settings
                await self._sleep(
                    backoff_delay(self._failures, s.backoff_initial_s, s.backoff_max_s, self._rng)
                )
            except Exception:
                # A bug (a report that cannot be encoded) must cost one report, not delivery.
                log.exception("report seq %d could not be sent; dropped it", report.seq)

    async def send_once(self, report: NodeReport) -> Directives | None:
        """Make one delivery attempt; return the directives received (None for an empty reply).

        Raises :class:`ReportError` after counting it (and logging it on a state change).
        Used by :meth:`run` and by the agent's one-shot mode, which calls :meth:`stop` after.
        """
        sent = self._delta.outgoing(report)
        accepted = False
        try:
            directives = await self._post(sent)
            accepted = True
        except ReportRejectedError as e:
            self._rejected(e)
            raise
        except ReportError as e:
            self._failed(e)
            raise
        finally:  # refused, failed or cancelled mid-send: the coordinator may lack a part
            if accepted:
                self._delta.delivered(report, sent)
            else:
                self._delta.forget()
        self._metrics.reports_sent.inc()
        self._reachable()
        self._last_rejection = None
        if directives is not None:
            self.directives = directives
            self.directives_received_at = self._clock.monotonic()
            if self._on_directives is not None:
                self._on_directives()
        return directives

    def current_directives(self) -> Directives | None:
        """The latest directives while their TTL lasts, else None (the node's defaults apply)."""
        if self.directives is None or self.directives_received_at is None:
            return None
        if self._clock.monotonic() - self.directives_received_at >= self.directives.ttl_s:
            return None
        return self.directives

    # ------------------------------------------------------------------ internals

    async def _post(self, report: NodeReport) -> Directives | None:
        headers = {"Content-Type": CONTENT_TYPE}
        token = self._read_token()
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        session = self._open_session()
        try:
            async with session.post(
                self._url, data=codec.encode(report), headers=headers, allow_redirects=False
            ) as resp:
                status = resp.status
                body = await _read_capped(resp)
        except TimeoutError as e:
            limit = self._settings.total_timeout_s
            raise ReportError("timeout", f"no answer within {limit} s") from e
        except aiohttp.ClientError as e:
            raise ReportError("network", f"{type(e).__name__}: {e}") from e
        if status == 429 or status >= 500:
            raise ReportError("throttled" if status == 429 else "server", f"HTTP {status}")
        if not 200 <= status < 300:
            snippet = body[:200].decode("utf-8", errors="replace")
            if token:
                snippet = snippet.replace(token, "<token>")
            raise ReportRejectedError(status, f"HTTP {status} for seq {report.seq}: {snippet!r}")
        if not body:
            return None
        try:
            directives = codec.decode_directives(body)
        except SchemaError as e:
            raise ReportError("malformed", f"directives reply: {e}") from e
        if directives.node != report.node:
            raise ReportError("malformed", f"directives for node {directives.node!r}")
        return directives

    def _read_token(self) -> str | None:
        """The bearer token as the file holds it now; errors never quote the file's content.

        Read on the event loop, so through :func:`common.files.read_regular`: a FIFO in
        the token's place must fail this send, not block every task of the agent.
        """
        path = self._settings.token_file
        if path is None:
            return None
        try:
            token = read_regular(path, MAX_TOKEN_B).decode("utf-8").strip()
        except OSError as e:
            raise ReportError("token", f"cannot read token file {path} ({e.strerror})") from e
        except UnicodeDecodeError as e:
            raise ReportError("token", f"token file {path} is not UTF-8") from e
        if not token or not token.isascii() or not token.isprintable() or " " in token:
            raise ReportError("token", f"token file {path} holds no usable token")
        return token

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            s = self._settings
            tls = _tls_context(s.ca_file) if s.ca_file else True
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(
                    total=s.total_timeout_s, sock_connect=s.connect_timeout_s
                ),
                connector=aiohttp.TCPConnector(ssl=tls),
            )
        return self._session

    def _failed(self, e: ReportError) -> None:
        self._metrics.report_failures.labels(cause=e.cause).inc()
        self._failures += 1
        if self._failing is None:
            log.warning("coordinator unreachable (%s): %s", e.cause, e)
        elif e.cause != self._failing:
            log.info("coordinator still unreachable, now (%s): %s", e.cause, e)
        self._failing = e.cause

    def _rejected(self, e: ReportRejectedError) -> None:
        self._metrics.report_failures.labels(cause=e.cause).inc()
        self._reachable()
        level = logging.DEBUG if e.status == self._last_rejection else logging.WARNING
        log.log(level, "coordinator rejected a report, dropped it: %s", e)
        self._last_rejection = e.status

    def _reachable(self) -> None:
        """End a failure streak: the coordinator answered, so the next send needs no delay."""
        if self._failing is not None:
            log.info("coordinator reachable again after %d failures", self._failures)
        self._failing = None
        self._failures = 0


async def _read_capped(resp: aiohttp.ClientResponse) -> bytes:
    """The reply body, cut one byte past what a directives reply can be (a bounded read)."""
    body = bytearray()
    async for chunk in resp.content.iter_chunked(16 * 1024):
        body += chunk
        if len(body) > _MAX_REPLY_B:
            break
    return bytes(body[: _MAX_REPLY_B + 1])


def _log_crash(task: asyncio.Task[None]) -> None:
    """Make a dead delivery task loud: otherwise the node silently stops reporting."""
    if not task.cancelled() and task.exception() is not None:
        log.error("report delivery stopped", exc_info=task.exception())


def _tls_context(ca_file: str) -> ssl.SSLContext:
    """A TLS context trusting the PEM bundle in ``ca_file``.

    Read with :func:`common.files.read_regular` rather than handed to OpenSSL by name: this
    runs on the event loop, where a FIFO in the bundle's place would block every task.
    """
    try:
        pem = read_regular(ca_file, MAX_CA_FILE_B).decode("ascii")
        if not pem.strip():  # cadata="" would quietly trust the system store instead
            raise ConfigError(f"--ca-file {ca_file}: empty, expected PEM certificates")
        return ssl.create_default_context(cadata=pem)
    except OSError as e:  # ssl.SSLError is an OSError
        raise ConfigError(f"--ca-file {ca_file}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"--ca-file {ca_file}: not a PEM certificate bundle") from e
