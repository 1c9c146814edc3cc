"""The collector runner: a hung collector costs its own section, never the others' or the
cycle, and never a growing pile of threads."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.collectors.base import NoData, Runner
from agent.kernelfiles import CollectorError
from agent.metrics import AgentMetrics
from common.schema import Absent

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 1.0
"""Long enough that a collector returning at once always makes it on a loaded machine."""


@dataclass
class Hangs:
    """A collector whose read blocks until the test releases it, as a read on a hung
    mount would; it counts how often it was started."""

    name: str
    release: threading.Event = field(default_factory=threading.Event)
    started: int = 0

    def collect(self) -> object:
        self.started += 1
        self.release.wait()
        raise CollectorError("released")


@dataclass
class Quick:
    name: str
    calls: int = 0

    def collect(self) -> object:
        self.calls += 1
        raise NoData(f"quick-{self.calls}")


def _collect_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("stowage-collect-")]


async def test_a_hung_collector_costs_its_section_and_nothing_else():
    runner = Runner(AgentMetrics(), timeout_s=DEADLINE_S)
    stuck_shared, stuck_alone = Hangs("memfrag"), Hangs("gpus")
    before, after = Quick("psi"), Quick("numa")
    threads_before = set(_collect_threads())
    try:
        for cycle in range(1, 6):
            first = await runner.run_one(before)
            hung = await runner.run_one(stuck_shared)
            alone = await runner.run_one(stuck_alone, isolated=True)
            # The shared thread is stuck in memfrag, yet the next collector runs on time.
            assert await runner.run_one(after) == Absent(f"quick-{cycle}")
            assert first == Absent(f"quick-{cycle}")
            if cycle == 1:
                assert hung == Absent(f"timeout: collection took over {DEADLINE_S:g} s")
                assert alone == Absent(f"timeout: collection took over {DEADLINE_S:g} s")
            else:  # still stuck: not started again, so no second thread for it
                assert hung == Absent("busy: previous collection still running")
                assert alone == Absent("busy: previous collection still running")
        assert (stuck_shared.started, stuck_alone.started) == (1, 1)
        # Two stuck threads, one fresh shared thread; five cycles did not add more.
        new = set(_collect_threads()) - threads_before
        assert len(new) == 3
        # Released, the stuck threads finish their job and end; the collector runs again.
        stuck_shared.release.set()
        stuck_alone.release.set()
        for thread in new - {runner._lanes["shared"].thread}:
            thread.join(10)
            assert not thread.is_alive()
        await _until_not_busy(runner, "memfrag", "gpus")
        assert await runner.run_one(stuck_shared) == Absent("error: released")
        assert await runner.run_one(stuck_alone, isolated=True) == Absent("error: released")
    finally:
        stuck_shared.release.set()
        stuck_alone.release.set()
        runner.close()
    for thread in set(_collect_threads()) - threads_before:
        thread.join(10)
        assert not thread.is_alive()  # close() lets every worker end


async def _until_not_busy(runner: Runner, *names: str) -> None:
    """Yield until the finished jobs, handed to the loop with call_soon_threadsafe, have
    cleared the collectors' busy marks; the timeout only guards against a hung test."""
    async with asyncio.timeout(10):
        while any(name in runner._busy for name in names):  # noqa: ASYNC110
            await asyncio.sleep(0)


def test_a_collector_stuck_forever_does_not_keep_the_process_from_exiting(tmp_path):
    """Worker threads are daemons: ``--once`` exits with a collector still blocked."""
    script = textwrap.dedent(
        """
        import asyncio, threading
        from agent.collectors.base import Runner
        from agent.metrics import AgentMetrics

        class Forever:
            name = "memfrag"
            def collect(self):
                threading.Event().wait()

        async def main():
            runner = Runner(AgentMetrics(), timeout_s=0.2)
            print(await runner.run_one(Forever()))
            runner.close()

        asyncio.run(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert "timeout: collection took over 0.2 s" in result.stdout


@dataclass
class Exits:
    """A collector whose library calls ``sys.exit``: the job must still be settled."""

    name: str = "numa"
    exit_now: bool = True

    def collect(self) -> object:
        if self.exit_now:
            raise SystemExit(3)
        raise NoData("back")


async def test_a_job_ending_in_a_base_exception_is_settled_not_left_busy():
    runner = Runner(AgentMetrics(), timeout_s=DEADLINE_S)
    collector = Exits()
    try:
        with pytest.raises(SystemExit) as info:  # reaches the caller, as it would inline
            await runner.run_one(collector)
        assert info.value.code == 3
        collector.exit_now = False
        assert await runner.run_one(collector) == Absent("back")
    finally:
        runner.close()
