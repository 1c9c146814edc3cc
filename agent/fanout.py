"""Reporting to every coordinator replica, not just one.

Every replica serves scheduler calls, so every replica needs every node's signals. Behind
an ordinary Service each report would reach one replica at random. With ``--fan-out`` the
agent resolves the coordinator's host name (a headless Service: one address per ready
replica) and keeps one :class:`~agent.reporter.Reporter` per address — each with its own
newest-only slot and backoff, so a replica that is down or slow holds up none of the
others. Addresses are resolved again every ``refresh_s``; replicas that come and go are
added and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

from agent.metrics import AgentMetrics
from agent.reporter import Reporter
from agent.settings import ReporterSettings
from common.clock import Clock
from common.schema import Directives, NodeReport

log = logging.getLogger(__name__)

Resolver = Callable[[str], Awaitable[list[str]]]
"""Coordinator base URL → the base URLs of its replicas."""


async def resolve_replicas(url: str) -> list[str]:
    """One URL per address the host name resolves to (the port and path kept)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    urls = []
    for _, _, _, _, address in infos:
        ip = str(address[0])  # a host string; the int form typeshed allows never comes here
        netloc = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        urls.append(urlunsplit((parts.scheme, netloc, parts.path, "", "")))
    return sorted(set(urls))


class FanOutReporter:
    """The Reporter interface (start, offer, current_directives, stop) over all replicas."""

    def __init__(
        self,
        settings: ReporterSettings,
        *,
        metrics: AgentMetrics,
        clock: Clock,
        resolve: Resolver = resolve_replicas,
        refresh_s: float = 30.0,
        on_directives: Callable[[], None] | None = None,
    ) -> None:
        assert settings.coordinator_url is not None
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._resolve = resolve
        self._refresh_s = refresh_s
        self._on_directives = on_directives
        self.reporters: dict[str, Reporter] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._refresh()
        self._task = asyncio.create_task(self._keep_resolving(), name="stowage-fanout")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for reporter in self.reporters.values():
            await reporter.stop()
        self.reporters.clear()

    def offer(self, report: NodeReport) -> None:
        for reporter in self.reporters.values():
            reporter.offer(report)

    def current_directives(self) -> Directives | None:
        """The directives to follow among the valid ones the replicas sent.

        Only the leader decides throttles; the other replicas answer with the defaults
        (no quota, no local bounds). So directives that decide something win over ones
        that do not, and among equals the most recently issued: otherwise an agent would
        drop the leader's throttle whenever a non-leader happened to answer last. Each
        replica's latest answer replaces its earlier one, so a replica that stops leading
        stops counting at its next answer, and the TTL bounds it in any case.
        """
        valid = [d for r in self.reporters.values() if (d := r.current_directives()) is not None]
        return max(valid, key=_precedence, default=None)

    async def _keep_resolving(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            await self._refresh()

    async def _refresh(self) -> None:
        url = self._settings.coordinator_url
        assert url is not None
        try:
            replicas = set(await self._resolve(url))
        except OSError as e:
            log.warning("cannot resolve coordinator %s: %s; keeping %d replicas", url, e,
                        len(self.reporters))  # fmt: skip
            return
        for gone in set(self.reporters) - replicas:
            log.info("coordinator replica %s gone", gone)
            await self.reporters.pop(gone).stop()
        for new in sorted(replicas - set(self.reporters)):
            log.info("reporting to coordinator replica %s", new)
            reporter = Reporter(
                dataclasses.replace(self._settings, coordinator_url=new),
                metrics=self._metrics,
                clock=self._clock,
                on_directives=self._on_directives,
            )
            await reporter.start()
            self.reporters[new] = reporter


def _precedence(d: Directives) -> tuple[bool, float]:
    return (d.be_cpu_quota_m is not None or d.local is not None, d.issued_at)
