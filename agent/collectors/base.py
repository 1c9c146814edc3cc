"""What a collector is, and how one runs without hurting the others.

A collector reads one signal from the host (through :class:`~agent.hostpaths.HostPaths`)
and returns its section of the report. Two outcomes besides success:

* :class:`NoData` — the source does not exist on this node (no PSI, no GPU, cgroup v1,
  first rate sample). The section becomes ``Absent(reason)``; this is normal.
* :class:`CollectorError` — a real failure (permission denied, a parse error). The section
  becomes ``Absent("error: …")`` and the failure is logged and counted.

:func:`run_one` runs a collector in a worker thread under a timeout and turns every
outcome, including a bug, into a section or an ``Absent``: one collector never breaks
another or the report.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent import metrics as agent_metrics
from common import codec
from common.errors import SchemaError
from common.schema import Absent

log = logging.getLogger(__name__)

_MAX_REASON = 300


class NoData(Exception):  # noqa: N818 - a control signal, not an error (see module docstring)
    """The signal does not exist on this node; ``reason`` is a short kebab-case code."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CollectorError(Exception):
    """A real failure while reading or parsing a signal."""


class Collector(Protocol):
    """One signal. ``collect`` is synchronous and blocking; it runs in a worker thread."""

    name: str

    def collect(self) -> Any:
        """Return this collector's report section, or raise NoData / CollectorError."""
        ...


def read_text(path: Path | str) -> str:
    """Read a kernel file; OSError becomes CollectorError naming the path.

    A missing file is a real failure here; collectors that treat absence as "not on
    this node" check for it first and raise :class:`NoData`. Plain ``os.read`` costs a
    third of ``Path.read_text`` (no buffered text layer), and an agent reads dozens of
    these files every cycle.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks).decode()
    except (OSError, UnicodeDecodeError) as e:
        raise CollectorError(f"read {path}: {getattr(e, 'strerror', None) or e}") from e


def read_optional(path: Path | str) -> str | None:
    """Like :func:`read_text`, but None when the file does not exist (one syscall fewer
    than checking first)."""
    try:
        return read_text(path)
    except CollectorError as e:
        if isinstance(e.__cause__, FileNotFoundError):
            return None
        raise


def _collect_valid(collector: Collector) -> Any:
    """Runs in a worker thread: collect, then check the section against the schema."""
    return codec.validate(collector.collect())


@dataclass
class Runner:
    """Runs collectors off the event loop, with timeouts, timing and one log line per
    state change.

    Collectors that only read kernel files share one worker thread and run one after
    another: running them concurrently costs more CPU in thread switches than the reads
    themselves. A collector that may block on something outside the kernel (NVML, the
    network) gets a thread of its own (``isolated``), so a hang there stalls only it.
    """

    metrics: agent_metrics.AgentMetrics
    timeout_s: float = 5.0
    _last_state: dict[str, str] = field(default_factory=dict)
    _busy: set[str] = field(default_factory=set)
    _threads: dict[str, ThreadPoolExecutor] = field(default_factory=dict)

    async def run_one(self, collector: Collector, *, isolated: bool = False) -> Any:
        """Collect one section; never raises (except cancellation)."""
        name = collector.name
        if name in self._busy:
            return self._absent(name, "busy: previous collection still running", error=True)
        self._busy.add(name)
        timer = self.metrics.collector_duration.labels(name).time()
        executor = self._executor(name if isolated else "shared")
        loop = asyncio.get_running_loop()
        thread = loop.run_in_executor(executor, _collect_valid, collector)
        thread.add_done_callback(lambda _: self._busy.discard(name))
        try:
            with timer:
                section = await asyncio.wait_for(asyncio.shield(thread), self.timeout_s)
        except NoData as e:
            return self._absent(name, e.reason, error=False)
        except TimeoutError:
            return self._absent(
                name, f"timeout: collection took over {self.timeout_s:g} s", error=True
            )
        except CollectorError as e:
            return self._absent(name, f"error: {e}", error=True)
        except SchemaError as e:
            return self._absent(name, f"error: invalid section: {e}", error=True)
        except Exception as e:  # a bug must not take the agent down; it is logged in full
            log.exception("collector %s failed unexpectedly", name)
            return self._absent(name, f"error: internal: {type(e).__name__}: {e}", error=True)
        self.metrics.collector_success.labels(name).set(1)
        self._transition(name, "ok", logging.INFO)
        return section

    def close(self) -> None:
        """Stop the worker threads (a hung one is abandoned, not waited for)."""
        for executor in self._threads.values():
            executor.shutdown(wait=False, cancel_futures=True)
        self._threads.clear()

    def _executor(self, key: str) -> ThreadPoolExecutor:
        executor = self._threads.get(key)
        if executor is None:
            executor = self._threads[key] = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"stowage-collect-{key}"
            )
        return executor

    def _absent(self, name: str, reason: str, *, error: bool) -> Absent:
        reason = reason[:_MAX_REASON]
        self.metrics.collector_success.labels(name).set(0 if error else 1)
        self.metrics.collector_absent.labels(name, reason.split(":", 1)[0]).inc()
        self._transition(name, reason, logging.ERROR if error else logging.DEBUG)
        return Absent(reason)

    def _transition(self, name: str, state: str, level: int) -> None:
        previous = self._last_state.get(name)
        if previous == state:
            return
        self._last_state[name] = state
        if state == "ok" and previous is None:
            return  # the common start: nothing to say
        log.log(level, "collector %s: %s", name, state if state != "ok" else "recovered")
