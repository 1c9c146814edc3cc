"""Injected faults: the failures a real API server (or the network to it) produces, on
demand, so clients' retry, backoff and relist paths run against the real protocol.

    api.faults.add(Fault.error(429, method="PATCH", path=r"^/api/v1/nodes/", retry_after_s=1))
    api.faults.add(Fault.slow(3.0, path=r"/leases/"))          # answered, but late
    api.faults.add(Fault.drop_watch(after=2, path=r"^/api/v1/nodes$"))
    api.faults.add(Fault.expire_watch(after=0, path=r"^/api/v1/nodes$"))

A fault matches requests by method, a regular expression searched in the path, whether
the request is a watch, and the client's User-Agent; it hits the matching requests after
the first ``skip`` of them, ``times`` times (None: until removed), and counts its ``hits``.

What each does, as a real apiserver does it:

* ``error``: the ``Status`` object of that code with its reason (409 ``Conflict``, 429
  ``TooManyRequests`` as the max-in-flight filter answers, with ``Retry-After`` and
  ``details.retryAfterSeconds``; 500 ``InternalError``; 503 ``ServiceUnavailable``...).
  Nothing is written.
* ``slow``: the request waits, then is served as usual — a client that gave up in the
  meantime does not know whether its write landed, exactly as with a real timeout.
* ``drop_watch``: after ``after`` events the connection is cut mid-stream (no final
  chunk), as a load balancer or an apiserver restart does.
* ``expire_watch``: after ``after`` events an in-band ``ERROR`` event with a 410
  ``Expired`` Status ends the stream, as when the watch cache has moved past the client.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from aiohttp import web

from hack.kubeapi import errors

Kind = Literal["error", "slow", "drop_watch", "expire_watch"]
REASONS: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
"""``metav1.StatusReason`` for each code the apiserver answers with."""


@dataclass(eq=False)
class Fault:
    kind: Kind
    method: str | None = None
    path: str = ""
    watch: bool | None = None
    agent: str | None = None
    times: int | None = 1
    skip: int = 0
    status: int = 0
    retry_after_s: int = 0
    delay_s: float = 0.0
    after: int = 0
    hits: int = field(default=0, init=False)
    seen: int = field(default=0, init=False)

    # ``match`` below: method, path, watch, agent, times, skip (the fields above).

    @classmethod
    def error(cls, status: int, *, retry_after_s: int = 0, **match: Any) -> Fault:
        if status not in REASONS:
            raise ValueError(f"status: no Status reason known for {status}")
        return cls("error", status=status, retry_after_s=retry_after_s, **match)

    @classmethod
    def slow(cls, delay_s: float, **match: Any) -> Fault:
        return cls("slow", delay_s=delay_s, **match)

    @classmethod
    def drop_watch(cls, *, after: int = 0, **match: Any) -> Fault:
        return cls("drop_watch", after=after, watch=True, **match)

    @classmethod
    def expire_watch(cls, *, after: int = 0, **match: Any) -> Fault:
        return cls("expire_watch", after=after, watch=True, **match)

    def matches(self, request: web.Request, watching: bool) -> bool:
        return (
            (self.method is None or request.method == self.method.upper())
            and re.search(self.path, request.path) is not None
            and (self.watch is None or self.watch == watching)
            and (self.agent is None or request.headers.get("User-Agent") == self.agent)
        )

    def status_object(self) -> errors.ApiError:
        """The error answer, with what the apiserver puts in it for this code."""
        code, reason = self.status, REASONS[self.status]
        details: dict[str, object] = {}
        headers: dict[str, str] = {}
        if self.retry_after_s:
            details["retryAfterSeconds"] = self.retry_after_s
            headers["Retry-After"] = str(self.retry_after_s)
        message = {
            409: "Operation cannot be fulfilled: " + errors.MODIFIED,
            410: "too old resource version",
            429: "Too many requests, please try again later.",
            500: "Internal error occurred: injected fault",
            503: "the server is currently unable to handle the request",
        }.get(code, f"injected fault ({code})")
        return errors.ApiError(errors.status(code, reason, message, details or None), headers)


class Faults:
    """The faults in force; safe to change from a test's thread while the server runs."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        with self._lock:
            if fault in self._faults:
                self._faults.remove(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, request: web.Request, watching: bool) -> Fault | None:
        """The first fault hitting this request, counted as a hit."""
        with self._lock:
            for fault in self._faults:
                if not fault.matches(request, watching):
                    continue
                fault.seen += 1
                if fault.seen <= fault.skip:
                    continue
                if fault.times is not None and fault.hits >= fault.times:
                    continue
                fault.hits += 1
                return fault
        return None


WATCH_FAULT: Final = web.RequestKey("watch_fault", Fault)
"""The drop/expire fault a watch request carries into :func:`hack.kubeapi.watch.stream`."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def middleware(faults: Faults) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    @web.middleware
    async def inject(request: web.Request, handler: Handler) -> web.StreamResponse:
        watching = request.query.get("watch") in ("true", "1")
        fault = faults.take(request, watching)
        if fault is None:
            return await handler(request)
        if fault.kind == "error":
            error = fault.status_object()
            return web.json_response(error.status, status=error.code, headers=error.headers)
        if fault.kind == "slow":
            await request.read()  # received in full (kept by aiohttp), then held
            await asyncio.sleep(fault.delay_s)
        elif watching:
            request[WATCH_FAULT] = fault
        return await handler(request)

    return inject
