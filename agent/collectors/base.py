"""What a collector is, and how one runs without hurting the others.

A collector reads one signal from the host (through :class:`~agent.hostpaths.HostPaths`)
and returns its section of the report. Two outcomes besides success:

* :class:`NoData` — the source does not exist on this node (no PSI, no GPU, cgroup v1,
  first rate sample). The section becomes ``Absent(reason)``; this is normal.
* :class:`~agent.kernelfiles.CollectorError` — a real failure (permission denied, a parse
  error). The section becomes ``Absent("error: …")`` and the failure is logged and counted.

:meth:`Runner.run_one` runs a collector in a worker thread under a deadline and turns
every outcome, including a bug or a hang, into a section or an ``Absent``: one collector
never breaks another or the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent import metrics as agent_metrics
from agent.kernelfiles import CollectorError
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


class Collector(Protocol):
    """One signal. ``collect`` is synchronous and blocking; it runs in a worker thread."""

    name: str

    def collect(self) -> Any:
        """Return this collector's report section, or raise NoData / CollectorError."""
        ...


def _collect_valid(collector: Collector) -> Any:
    """Runs in a worker thread: collect, then check the section against the schema."""
    return codec.validate(collector.collect())


class _Lane:
    """One daemon worker thread that runs jobs in order and hands results to the loop.

    Not a ``ThreadPoolExecutor``: the interpreter joins its workers at exit, so a single
    collector stuck in a read would keep ``--once`` (or a SIGTERM'd agent) from ever
    exiting. A daemon thread is abandoned at exit instead.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._work, name=name, daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((fn, loop, future))
        return future

    def retire(self) -> None:
        """Let the thread end after the job it is running, however long that takes."""
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, loop, future = job
            try:
                outcome: tuple[Any, BaseException | None] = (fn(), None)
            except BaseException as e:  # settled whatever it is, as concurrent.futures does:
                outcome = (None, e)  # an unsettled job would leave its collector busy forever
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle, future, *outcome)


_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


@dataclass
class Runner:
    """Runs collectors off the event loop, each under a deadline, with timing and one log
    line per state change.

    Collectors that only read kernel files share one worker thread (a *lane*) and run
    one after another: running them concurrently costs more CPU in thread switches than
    the reads themselves. A collector that may block on something outside the kernel
    (NVML, the network) gets a lane of its own (``isolated``).

    A collector that misses its deadline costs only its own section
    (``Absent("timeout: …")``). Threads cannot be killed, so its lane is *retired*: the
    thread finishes the stuck job whenever it returns, then ends, and the next
    collector on that lane gets a fresh thread — nobody queues behind the stuck one.
    Until the stuck job returns, that collector is skipped (``Absent("busy: …")``)
    rather than started again, so each collector holds at most one stuck thread and the
    threads stay bounded by the number of collectors, however long the hang lasts.
    """

    metrics: agent_metrics.AgentMetrics
    timeout_s: float = 5.0
    _last_state: dict[str, str] = field(default_factory=dict)
    _busy: set[str] = field(default_factory=set)
    _lanes: dict[str, _Lane] = field(default_factory=dict)

    async def run_one(self, collector: Collector, *, isolated: bool = False) -> Any:
        """Collect one section; never raises (except cancellation)."""
        name = collector.name
        if name in self._busy:
            return self._absent(name, "busy: previous collection still running", error=True)
        key = name if isolated else "shared"
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(f"stowage-collect-{key}")
        self._busy.add(name)
        job = lane.submit(functools.partial(_collect_valid, collector))
        job.add_done_callback(functools.partial(self._finished, name))
        timer = self.metrics.collector_duration.labels(name).time()
        try:
            with timer:
                section = await asyncio.wait_for(asyncio.shield(job), self.timeout_s)
        except NoData as e:
            return self._absent(name, e.reason, error=False)
        except TimeoutError:
            if self._lanes.get(key) is lane:
                del self._lanes[key]
                lane.retire()
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
        """Let the worker threads end (a stuck one is abandoned, not waited for)."""
        for lane in self._lanes.values():
            lane.retire()
        self._lanes.clear()

    def _finished(self, name: str, job: asyncio.Future[Any]) -> None:
        """The job returned, possibly long after its deadline: the collector may run again."""
        self._busy.discard(name)
        if not job.cancelled():
            job.exception()  # retrieved: a late failure was already reported as a timeout

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
