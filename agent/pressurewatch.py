"""The fast path's eyes: watch the latency-sensitive (LS) pods' CPU stall between reports.

A report round trip takes one to two intervals (10–20 s); an LS pod stalled behind batch
work for that long has already missed its SLO. When the coordinator's directive carries
``local`` bounds, the agent watches the LS pods' ``cpu.pressure`` itself and calls
``on_high`` the moment the "some" stall share over ``window_s`` reaches
``pressure_high_pct`` (the caller then tightens BE at once, within the bounds).

Two ways to watch, the first that works:

* **PSI trigger** — write ``some <stall_us> <window_us>`` to each file and ``poll()`` for
  ``POLLPRI`` (``Documentation/accounting/psi.rst``): the kernel checks ten times a window
  and wakes us only on a breach. A blocking ``poll()`` runs in one daemon thread and
  hands events to the loop. The kernel answers ``EINVAL`` to a window that is not a
  multiple of 2 s unless the opener has ``CAP_SYS_RESOURCE`` (kernels ≥ 6.4; older
  ones refuse any unprivileged trigger with ``EPERM``/``EACCES``). The window is never
  rounded up to make it pass: an unprivileged trigger is driven by the 2 s averaging
  worker, too slow for a reaction under a second.
* **Short poll** (fallback, what runs in a container without ``CAP_SYS_RESOURCE``) —
  read each file's ``some total`` every ``poll_s`` (100 ms) and compute the share over
  the last ``window_s`` from the ``total`` delta (see :class:`StallWindow`). Reading a
  handful of small files ten times a second costs well under 1 % of a CPU.

Where no LS pod has a ``cpu.pressure`` file (cgroup v1 without a cgroup2 tree) there is
nothing to watch and the fast path stays off; the coordinator's watermark fallback still
throttles on the report path.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import select
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent.kernelfiles import parse_pressure
from common.clock import Clock

log = logging.getLogger(__name__)

POLL_S: Final = 0.1
"""Fallback sampling period: ten looks per second keep onset → action well under 1 s."""
_REFUSED: Final = frozenset({errno.EINVAL, errno.EPERM, errno.EACCES, errno.EOPNOTSUPP})
"""Errors by which a kernel says "no trigger for you" (window/privilege/PSI off)."""

OnHigh = Callable[[Path, float], None]
"""Called in the event loop with the LS pressure file and the stall share (%) that crossed."""


@dataclass(frozen=True, slots=True)
class WatchSpec:
    """What to watch: the LS pods' ``cpu.pressure`` files and the bounds' threshold."""

    paths: tuple[Path, ...]
    high_pct: float
    window_s: float


class StallWindow:
    """The "some" stall share of one pressure file over the last ``window_s``.

    Keeps the ``(monotonic s, total µs)`` samples of the last window plus one older anchor,
    so the share is always measured over at least a whole window (no decision on a
    fragment right after the watch starts). A total that goes back (the cgroup was
    recreated) starts over.
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, at: float, total_us: int) -> float | None:
        """Record a sample; the share (%) over the last full window, or None before one."""
        if self._samples:
            last_at, last_total = self._samples[-1]
            if total_us < last_total:
                self._samples.clear()
            elif at <= last_at:
                return None  # the same instant twice: nothing new to say
        self._samples.append((at, total_us))
        # Drop anchors while the next one still covers a whole window.
        while len(self._samples) >= 2 and at - self._samples[1][0] >= self.window_s:
            self._samples.popleft()
        first_at, first_total = self._samples[0]
        span = at - first_at
        if span < self.window_s:
            return None
        return min(100.0, 100.0 * (total_us - first_total) / (span * 1e6))


def try_trigger(path: Path, stall_us: int, window_us: int) -> int | None:
    """Register a PSI trigger on ``path``; its fd, or None where the kernel refuses one.

    Other errors (the file is gone) propagate as OSError.
    """
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(fd, f"some {stall_us} {window_us}\0".encode())
    except OSError as e:
        os.close(fd)
        if e.errno in _REFUSED:
            return None
        raise
    return fd


def read_some_total(path: Path) -> int | None:
    """The ``some total`` (µs) of a pressure file; None when it is gone or unreadable."""
    try:
        text = path.read_text()
        some = parse_pressure(text).get("some")
    except (OSError, ValueError):
        return None
    return None if some is None else some[3]


class PressureWatch:
    """Watches a :class:`WatchSpec` until it changes; calls ``on_high`` on each breach.

    In poll mode ``on_high`` is called on every sample at or above the threshold (ten a
    second while the stall lasts); the caller makes repeated calls cheap. In trigger mode
    the kernel rate-limits events to one per window.
    """

    def __init__(self, clock: Clock, on_high: OnHigh, poll_s: float = POLL_S) -> None:
        self._clock = clock
        self._on_high = on_high
        self._poll_s = poll_s
        self._spec: WatchSpec | None = None
        self._windows: dict[Path, StallWindow] = {}
        self._changed = asyncio.Event()
        self._fds: dict[int, Path] = {}
        self._thread: threading.Thread | None = None
        self._stop_thread = threading.Event()
        self.mode = "off"
        """``off`` (nothing to watch), ``trigger`` or ``poll``: shown in logs and tests."""

    @property
    def spec(self) -> WatchSpec | None:
        """What is watched now (None: nothing)."""
        return self._spec

    def watch(self, spec: WatchSpec | None) -> None:
        """Watch ``spec`` from now on (None or no paths: stop watching)."""
        if spec is not None and not spec.paths:
            spec = None
        if spec == self._spec:
            return
        self._stop_triggers()
        self._spec = spec
        self._windows = {}
        mode = "off"
        if spec is not None:
            mode = "trigger" if self._start_triggers(spec) else "poll"
        if mode != self.mode:
            log.info("LS pressure watch: %s", mode)
        self.mode = mode
        self._changed.set()

    async def run(self) -> None:
        """Sample in poll mode; otherwise wait for the spec to change. Runs until cancelled."""
        try:
            while True:
                if self.mode != "poll":
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                self.poll_once()
                self._changed.clear()
                with contextlib.suppress(TimeoutError):  # see agent.colocation on wait_for
                    async with asyncio.timeout(self._poll_s):
                        await self._changed.wait()
        finally:
            self._stop_triggers()

    def poll_once(self) -> None:
        """Read every watched file once and report the first breach."""
        spec = self._spec
        if spec is None:
            return
        now = self._clock.monotonic()
        for path in spec.paths:
            total = read_some_total(path)
            if total is None:
                self._windows.pop(path, None)
                continue
            window = self._windows.setdefault(path, StallWindow(spec.window_s))
            share = window.add(now, total)
            if share is not None and share >= spec.high_pct:
                self._on_high(path, share)
                return

    def close(self) -> None:
        self._stop_triggers()

    # ------------------------------------------------------------ trigger mode

    def _start_triggers(self, spec: WatchSpec) -> bool:
        """Register a trigger on every file; False (nothing left registered) if any refuses."""
        window_us = round(spec.window_s * 1e6)
        stall_us = max(1, round(window_us * spec.high_pct / 100))
        fds: dict[int, Path] = {}
        try:
            for path in spec.paths:
                fd = try_trigger(path, stall_us, window_us)
                if fd is None:
                    for opened in fds:
                        os.close(opened)
                    return False
                fds[fd] = path
        except OSError as e:  # a file vanished: poll mode copes with that per file
            log.debug("PSI trigger not registered: %s", e)
            for opened in fds:
                os.close(opened)
            return False
        self._fds = fds
        self._stop_thread.clear()
        loop = asyncio.get_running_loop()
        self._thread = threading.Thread(
            target=self._wait_for_events,
            args=(loop, dict(fds), spec.high_pct),
            name="stowage-psi-trigger",
            daemon=True,
        )
        self._thread.start()
        return True

    def _wait_for_events(
        self, loop: asyncio.AbstractEventLoop, fds: dict[int, Path], high_pct: float
    ) -> None:
        """Thread body: block in poll(); hand each POLLPRI to the loop; drop gone sources."""
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLPRI)
        while not self._stop_thread.is_set() and fds:
            for fd, events in poller.poll(200):
                if events & select.POLLERR:  # the cgroup was removed
                    poller.unregister(fd)
                    fds.pop(fd, None)
                elif events & select.POLLPRI:
                    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                        loop.call_soon_threadsafe(self._on_high, fds[fd], high_pct)

    def _stop_triggers(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop_thread.set()
            thread.join()
        for fd in self._fds:
            os.close(fd)
        self._fds = {}
