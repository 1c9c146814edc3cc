"""The reporter against a real aiohttp server on 127.0.0.1.

Backoff sleeps are injected: ``GatedSleep`` records each delay and parks the reporter
until the test releases it, so outages are stepped through deterministically and no
test waits on (or asserts about) the wall clock.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiohttp import web
from msgspec import structs

from agent import reporter
from agent.metrics import AgentMetrics
from agent.settings import ReporterSettings
from common import codec
from common.errors import ConfigError
from common.schema import MAX_BE_PODS, SCHEMA_VERSION, Absent, Directives, LocalBounds, NodeReport
from tests.hosts import FakeClock
from tests.kit import eventually

NODE = "node-a"
SECRET = "s3cr3t-token-value"


def make_report(seq: int, node: str = NODE) -> NodeReport:
    gone = Absent("test")
    return NodeReport(
        schema_version=SCHEMA_VERSION,
        node=node,
        agent_version="0.1.0",
        seq=seq,
        measured_at=1_700_000_000.0 + seq,
        psi=gone,
        memfrag=gone,
        allocatable=gone,
        numa=gone,
        gpus=gone,
        usage=gone,
        pods=gone,
    )


def make_directives(ttl_s: float = 30.0, quota_m: int | None = 500) -> Directives:
    return Directives(
        schema_version=SCHEMA_VERSION,
        node=NODE,
        issued_at=1_700_000_000.0,
        ttl_s=ttl_s,
        be_cpu_quota_m=quota_m,
    )


class MaxRandom(random.Random):
    """Always draws the top of the range, so delays equal the backoff ceilings."""

    def random(self) -> float:
        return 1.0


class GatedSleep:
    """Records backoff delays; each sleep waits until the test calls :meth:`release`."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self._parked: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        fut = asyncio.get_running_loop().create_future()
        self._parked.put_nowait(fut)
        await fut

    async def parked(self) -> asyncio.Future[None]:
        """Wait until the reporter is in a backoff sleep (an attempt has just failed)."""
        async with asyncio.timeout(10):
            return await self._parked.get()

    async def release(self) -> None:
        (await self.parked()).set_result(None)


async def no_sleep(delays: list[float], delay: float) -> None:
    delays.append(delay)
    await asyncio.sleep(0)


@dataclass
class Coordinator:
    """Scripted coordinator: answers statuses from ``script`` (then 200) and records requests."""

    script: list[int] = field(default_factory=list)
    reply: bytes = b""
    seqs: list[int] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    content_types: list[str] = field(default_factory=list)
    hang_first: bool = False
    unhang: asyncio.Event = field(default_factory=asyncio.Event)
    echo_auth: bool = False

    async def handle(self, request: web.Request) -> web.Response:
        report = codec.decode_report(await request.read())
        self.seqs.append(report.seq)
        self.auth.append(request.headers.get("Authorization"))
        self.content_types.append(request.content_type)
        if self.hang_first and len(self.seqs) == 1:
            await self.unhang.wait()
        status = self.script.pop(0) if self.script else 200
        if status == 200:
            return web.Response(status=200, body=self.reply)
        if status == 204:
            return web.Response(status=204)
        text = f"echo {self.auth[-1]}" if self.echo_auth else "no"
        return web.Response(status=status, text=text)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/reports", self.handle)
        return app


Factory = Callable[..., Awaitable[reporter.Reporter]]


@pytest.fixture
def metrics() -> AgentMetrics:
    return AgentMetrics()


@pytest.fixture
async def make_reporter(metrics: AgentMetrics) -> AsyncIterator[Factory]:
    made: list[reporter.Reporter] = []

    async def factory(url: str, *, start: bool = True, **kw: Any) -> reporter.Reporter:
        """``clock``, ``sleep`` and ``rng`` go to the reporter, other keywords to its settings."""
        clock, sleep = kw.pop("clock", None), kw.pop("sleep", GatedSleep())
        rng = kw.pop("rng", random.Random(7))
        settings = ReporterSettings(coordinator_url=url, **kw)
        rep = reporter.Reporter(settings, metrics=metrics, clock=clock, sleep=sleep, rng=rng)
        made.append(rep)
        if start:
            await rep.start()
        return rep

    yield factory
    for rep in made:
        await rep.stop()


async def serve(aiohttp_server: Any, coord: Coordinator) -> str:
    server = await aiohttp_server(coord.app())
    return str(server.make_url("")).rstrip("/")


def sample(metrics: AgentMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(f"stowage_agent_{name}_total", labels)
    return value or 0.0


def reporter_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == reporter.__name__]


# ------------------------------------------------------------------ happy path


async def test_posts_msgpack_with_rotating_token_and_keeps_directives(
    aiohttp_server: Any, make_reporter: Factory, metrics: AgentMetrics, tmp_path: Path
) -> None:
    want = make_directives(ttl_s=30.0)
    coord = Coordinator(reply=codec.encode(want))
    url = await serve(aiohttp_server, coord)
    token = tmp_path / "token"
    token.write_text("token-one\n")
    clock = FakeClock()
    rep = await make_reporter(url, start=False, token_file=str(token), clock=clock)

    assert rep.current_directives() is None
    assert await rep.send_once(make_report(1)) == want
    token.write_text("  token-two\n")
    await rep.send_once(make_report(2))

    assert coord.seqs == [1, 2]
    assert coord.content_types == ["application/msgpack"] * 2
    assert coord.auth == ["Bearer token-one", "Bearer token-two"]
    assert sample(metrics, "reports_sent") == 2
    assert rep.directives == want
    assert rep.directives_received_at == clock.monotonic()
    clock.advance(29.9)
    assert rep.current_directives() == want
    clock.advance(0.1)
    assert rep.current_directives() is None


async def test_empty_reply_keeps_directives_and_no_token_file_sends_no_auth(
    aiohttp_server: Any, make_reporter: Factory
) -> None:
    want = make_directives()
    coord = Coordinator(reply=codec.encode(want))
    rep = await make_reporter(await serve(aiohttp_server, coord), start=False)
    await rep.send_once(make_report(1))
    coord.reply = b""
    assert await rep.send_once(make_report(2)) is None
    coord.script = [204]
    assert await rep.send_once(make_report(3)) is None  # 204 goes through the non-200 branch
    assert rep.current_directives() == want
    assert coord.auth == [None, None, None]


async def test_the_largest_colocation_directives_fit_and_are_handed_on(
    aiohttp_server: Any, metrics: AgentMetrics
) -> None:
    """A throttle naming the most BE pods, with the longest reason, is read whole."""
    want = structs.replace(
        make_directives(),
        be_reason="r" * 4096,
        be_pods=[f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(MAX_BE_PODS)],
        local=LocalBounds(pressure_high_pct=30.0, window_s=1.0, quota_m=500, hold_s=30.0),
    )
    assert len(codec.encode(want)) > 16 * 1024  # bigger than one read chunk
    url = await serve(aiohttp_server, Coordinator(reply=codec.encode(want)))
    heard: list[Directives | None] = []
    rep = reporter.Reporter(
        ReporterSettings(coordinator_url=url), metrics=metrics, clock=FakeClock(),
        on_directives=lambda: heard.append(rep.current_directives()),
    )  # fmt: skip
    try:
        assert await rep.send_once(make_report(1)) == want
        assert heard == [want]  # handed on at once, not at the next cycle
    finally:
        await rep.stop()


async def test_offered_report_is_delivered_by_the_background_task(
    aiohttp_server: Any, make_reporter: Factory, metrics: AgentMetrics
) -> None:
    coord = Coordinator(reply=codec.encode(make_directives()))
    rep = await make_reporter(await serve(aiohttp_server, coord))
    rep.offer(make_report(1))
    await eventually(lambda: rep.current_directives() is not None)
    assert coord.seqs == [1]
    assert sample(metrics, "reports_superseded") == 0


# --------------------------------------------------------------------- backoff


@pytest.mark.parametrize("rng", [MaxRandom(), random.Random(1)], ids=["max", "seeded"])
async def test_backoff_grows_exponentially_capped_and_resets_on_success(
    aiohttp_server: Any, make_reporter: Factory, metrics: AgentMetrics, rng: random.Random
) -> None:
    coord = Coordinator(script=[503] * 6)
    delays: list[float] = []
    rep = await make_reporter(
        await serve(aiohttp_server, coord),
        sleep=lambda d: no_sleep(delays, d),
        rng=rng,
        backoff_initial_s=1.0,
        backoff_max_s=10.0,
    )
    rep.offer(make_report(1))
    await eventually(lambda: sample(metrics, "reports_sent") == 1)

    ceilings = [2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert len(delays) == 6
    for delay, ceiling in zip(delays, ceilings, strict=True):
        assert 1.0 <= delay <= ceiling
    if isinstance(rng, MaxRandom):
        assert delays == ceilings
    assert sample(metrics, "report_failures", cause="server") == 6

    coord.script = [503]
    rep.offer(make_report(2))
    await eventually(lambda: sample(metrics, "reports_sent") == 2)
    assert len(delays) == 7
    assert 1.0 <= delays[6] <= 2.0  # the streak restarted from the first step
    assert coord.seqs == [1] * 7 + [2, 2]


async def test_failure_streak_logs_one_line_each_way(
    aiohttp_server: Any,
    make_reporter: Factory,
    metrics: AgentMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    coord = Coordinator(script=[503] * 5)
    delays: list[float] = []
    rep = await make_reporter(
        await serve(aiohttp_server, coord), sleep=lambda d: no_sleep(delays, d)
    )
    rep.offer(make_report(1))
    await eventually(lambda: sample(metrics, "reports_sent") == 1)
    assert reporter_lines(caplog) == [
        "coordinator unreachable (server): HTTP 503",
        "coordinator reachable again after 5 failures",
    ]
    unreachable = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert [r.levelno for r in unreachable] == [logging.WARNING]


def test_backoff_delay_stays_within_bounds() -> None:
    rng = random.Random(3)
    for failures in range(1, 200):
        delay = reporter.backoff_delay(failures, 0.5, 30.0, rng)
        assert 0.5 <= delay <= min(30.0, 0.5 * 2**failures)


# ----------------------------------------------------------------- newest only


async def test_newest_only_while_connection_refused(
    make_reporter: Factory, metrics: AgentMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # Bound but not listening: connects are refused until the server adopts the socket.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    gate = GatedSleep()
    coord = Coordinator()
    runner = web.AppRunner(coord.app())
    await runner.setup()
    try:
        rep = await make_reporter(f"http://{host}:{port}", sleep=gate)
        rep.offer(make_report(1))
        await gate.release()
        rep.offer(make_report(2))
        fut = await gate.parked()
        for seq in (3, 4, 5):
            rep.offer(make_report(seq))
        sock.listen()
        await web.SockSite(runner, sock).start()
        fut.set_result(None)
        await eventually(lambda: sample(metrics, "reports_sent") == 1)
    finally:
        await runner.cleanup()
        sock.close()

    assert coord.seqs == [5]
    assert sample(metrics, "reports_superseded") == 4
    assert sample(metrics, "report_failures", cause="network") == 2
    assert gate.delays and len(gate.delays) == 2
    lines = reporter_lines(caplog)
    assert sum("unreachable" in line for line in lines) == 1
    assert sum("reachable again after 2 failures" in line for line in lines) == 1
    assert len(lines) == 2


async def test_report_superseded_in_flight_is_never_retried(
    aiohttp_server: Any, make_reporter: Factory, metrics: AgentMetrics
) -> None:
    coord = Coordinator(script=[503], hang_first=True)
    gate = GatedSleep()
    rep = await make_reporter(await serve(aiohttp_server, coord), sleep=gate)
    rep.offer(make_report(1))
    await eventually(lambda: coord.seqs == [1])
    rep.offer(make_report(2))  # seq 1 is on the wire and about to fail
    coord.unhang.set()
    await gate.release()
    await eventually(lambda: sample(metrics, "reports_sent") == 1)
    assert coord.seqs == [1, 2]
    assert sample(metrics, "reports_superseded") == 1


# -------------------------------------------------------------------- timeouts


async def test_timeout_is_counted_and_retried(
    aiohttp_server: Any, make_reporter: Factory, metrics: AgentMetrics
) -> None:
    coord = Coordinator(hang_first=True)
    gate = GatedSleep()
    rep = await make_reporter(
        await serve(aiohttp_server, coord),
        sleep=gate,
        total_timeout_s=0.2,
        connect_timeout_s=0.2,
    )
    try:
        rep.offer(make_report(1))
        await gate.release()
        await eventually(lambda: sample(metrics, "reports_sent") == 1)
    finally:
        coord.unhang.set()
    assert coord.seqs == [1, 1]
    assert sample(metrics, "report_failures", cause="timeout") == 1

    coord.seqs.clear()
    coord.hang_first, coord.unhang = True, asyncio.Event()
    try:
        with pytest.raises(reporter.ReportError) as err:
            await rep.send_once(make_report(2))
    finally:
        coord.unhang.set()
    assert err.value.cause == "timeout"


# --------------------------------------------------------- rejections and errors


@pytest.mark.parametrize("status", [400, 401, 403])
async def test_client_error_is_rejected(
    aiohttp_server: Any, make_reporter: Factory, metrics: AgentMetrics, status: int
) -> None:
    coord = Coordinator(script=[status])
    rep = await make_reporter(await serve(aiohttp_server, coord), start=False)
    with pytest.raises(reporter.ReportRejectedError) as err:
        await rep.send_once(make_report(1))
    assert err.value.status == status
    assert sample(metrics, "report_failures", cause="rejected") == 1


async def test_400_drops_the_report_without_retry(
    aiohttp_server: Any,
    make_reporter: Factory,
    metrics: AgentMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    coord = Coordinator(script=[400])
    gate = GatedSleep()
    rep = await make_reporter(await serve(aiohttp_server, coord), sleep=gate)
    rep.offer(make_report(1))
    await eventually(lambda: sample(metrics, "report_failures", cause="rejected") == 1)
    rep.offer(make_report(2))
    await eventually(lambda: sample(metrics, "reports_sent") == 1)
    assert coord.seqs == [1, 2]
    assert gate.delays == []
    assert sample(metrics, "reports_superseded") == 0
    lines = reporter_lines(caplog)
    assert len(lines) == 1 and "rejected" in lines[0] and "HTTP 400" in lines[0]


@pytest.mark.parametrize(
    "reply",
    [b"\xc1garbage", codec.encode(make_directives(ttl_s=-1.0)), b"\x90" * (65 * 1024)],
    ids=["garbage", "out-of-range", "oversized"],
)
async def test_malformed_reply_is_a_transient_failure(
    aiohttp_server: Any, make_reporter: Factory, metrics: AgentMetrics, reply: bytes
) -> None:
    coord = Coordinator(reply=reply)
    rep = await make_reporter(await serve(aiohttp_server, coord), start=False)
    with pytest.raises(reporter.ReportError) as err:
        await rep.send_once(make_report(1))
    assert err.value.cause == "malformed"
    assert not isinstance(err.value, reporter.ReportRejectedError)
    assert rep.directives is None


async def test_directives_for_another_node_are_malformed(
    aiohttp_server: Any, make_reporter: Factory
) -> None:
    coord = Coordinator(reply=codec.encode(make_directives()))
    rep = await make_reporter(await serve(aiohttp_server, coord), start=False)
    with pytest.raises(reporter.ReportError) as err:
        await rep.send_once(make_report(1, node="node-b"))
    assert err.value.cause == "malformed"


async def test_429_is_retried(
    aiohttp_server: Any, make_reporter: Factory, metrics: AgentMetrics
) -> None:
    coord = Coordinator(script=[429])
    gate = GatedSleep()
    rep = await make_reporter(await serve(aiohttp_server, coord), sleep=gate)
    rep.offer(make_report(1))
    await gate.release()
    await eventually(lambda: sample(metrics, "reports_sent") == 1)
    assert coord.seqs == [1, 1]
    assert sample(metrics, "report_failures", cause="throttled") == 1


# ---------------------------------------------------------------------- tokens


async def test_missing_token_file_fails_with_cause_token_then_recovers(
    aiohttp_server: Any,
    make_reporter: Factory,
    metrics: AgentMetrics,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    coord = Coordinator()
    token = tmp_path / "token"
    gate = GatedSleep()
    rep = await make_reporter(await serve(aiohttp_server, coord), sleep=gate, token_file=str(token))
    rep.offer(make_report(1))
    await gate.release()
    fut = await gate.parked()
    token.write_text(SECRET)
    fut.set_result(None)
    await eventually(lambda: sample(metrics, "reports_sent") == 1)
    assert coord.seqs == [1]
    assert coord.auth == [f"Bearer {SECRET}"]
    assert sample(metrics, "report_failures", cause="token") == 2
    lines = reporter_lines(caplog)
    assert len(lines) == 2
    assert "token file" in lines[0] and "reachable again after 2 failures" in lines[1]


async def test_token_never_appears_in_logs(
    aiohttp_server: Any,
    make_reporter: Factory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    coord = Coordinator(script=[503, 400, 401, 500], echo_auth=True)
    token = tmp_path / "token"
    token.write_text(SECRET + "\n")
    rep = await make_reporter(
        await serve(aiohttp_server, coord), start=False, token_file=str(token)
    )
    for seq in range(1, 6):
        try:
            await rep.send_once(make_report(seq))
        except reporter.ReportError as e:
            assert SECRET not in str(e)
    token.write_text("bad token with spaces")
    with pytest.raises(reporter.ReportError, match="no usable token"):
        await rep.send_once(make_report(6))
    assert coord.seqs == [1, 2, 3, 4, 5]
    assert len(reporter_lines(caplog)) >= 4
    assert SECRET not in caplog.text
    assert "spaces" not in caplog.text


async def test_a_fifo_token_file_fails_the_send_without_blocking_the_agent(
    aiohttp_server: Any, make_reporter: Factory, tmp_path: Path
) -> None:
    """The token is read on the event loop: a FIFO there must not stall every task."""
    coord = Coordinator()
    token = tmp_path / "token"
    os.mkfifo(token)
    passed = threading.Event()

    def unblock_a_blocked_reader() -> None:
        """Only a broken guard needs this: its read gets EOF and the test fails on the
        message instead of hanging the run."""
        if not passed.wait(30):
            with open(token, "w"):
                pass

    threading.Thread(target=unblock_a_blocked_reader, daemon=True).start()
    rep = await make_reporter(
        await serve(aiohttp_server, coord), start=False, token_file=str(token)
    )
    try:
        with pytest.raises(reporter.ReportError) as info:
            await rep.send_once(make_report(1))
    finally:
        passed.set()
    assert info.value.cause == "token"
    assert str(info.value).endswith(f"cannot read token file {token} (not a regular file (a FIFO))")
    assert coord.seqs == []


async def test_an_https_coordinator_is_trusted_through_the_ca_file(
    aiohttp_server: Any, make_reporter: Factory, tmp_path: Path
) -> None:
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_tls)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    trustme.CA().cert_pem.write_to_path(str(tmp_path / "other.pem"))
    coord = Coordinator()
    server = await aiohttp_server(coord.app(), ssl=server_tls)
    url = str(server.make_url("")).rstrip("/")
    assert url.startswith("https://127.0.0.1:")
    rep = await make_reporter(url, start=False, ca_file=str(tmp_path / "ca.pem"))
    await rep.send_once(make_report(1))
    stranger = await make_reporter(url, start=False, ca_file=str(tmp_path / "other.pem"))
    with pytest.raises(reporter.ReportError):
        await stranger.send_once(make_report(2))
    assert coord.seqs == [1]


# ------------------------------------------------------------------- lifecycle


async def test_unexpected_error_costs_one_report_not_delivery(
    aiohttp_server: Any,
    make_reporter: Factory,
    metrics: AgentMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    coord = Coordinator()
    rep = await make_reporter(await serve(aiohttp_server, coord))
    rep.offer(structs.replace(make_report(1), psi=object()))  # type: ignore[arg-type]
    await eventually(lambda: any(r.levelno == logging.ERROR for r in caplog.records))
    rep.offer(make_report(2))
    await eventually(lambda: sample(metrics, "reports_sent") == 1)
    assert coord.seqs == [2]
    assert "seq 1 could not be sent" in caplog.text


async def test_settings_are_checked_and_stop_is_idempotent(
    make_reporter: Factory, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError):
        reporter.Reporter(ReporterSettings(), metrics=AgentMetrics())
    with pytest.raises(ConfigError, match="--ca-file .*missing.pem: No such file"):
        await make_reporter("https://127.0.0.1:1", ca_file=str(tmp_path / "missing.pem"))
    rep = await make_reporter("http://127.0.0.1:1")
    await rep.stop()
    await rep.stop()
