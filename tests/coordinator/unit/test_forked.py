"""A computation in a forked child: another process, over a frozen copy, while the event
loop goes on serving."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from coordinator.forked import ChildFailed, run_forked


async def test_the_child_computes_in_another_process_over_a_frozen_copy() -> None:
    numbers = [1, 2, 3]

    def job() -> tuple[int, list[int]]:
        return os.getpid(), list(numbers)

    task = asyncio.ensure_future(run_forked(job, timeout_s=30))
    await asyncio.sleep(0)  # the fork is taken: the change below is not in the copy
    numbers.append(4)
    pid, seen = await task
    assert pid != os.getpid()
    assert seen == [1, 2, 3]


async def test_the_event_loop_keeps_serving_while_the_child_works(tmp_path: Path) -> None:
    """The child waits for a file that only a coroutine of this loop writes, once the
    loop has gone round while the child runs: a fork that blocked the loop would never
    see it (and would time out)."""
    flag = tmp_path / "served"

    def job() -> bool:
        give_up = time.monotonic() + 20
        while time.monotonic() < give_up:
            if flag.exists():
                return True
            time.sleep(0.001)
        return False

    task = asyncio.ensure_future(run_forked(job, timeout_s=30))
    for _ in range(3):
        await asyncio.sleep(0)
    flag.write_text("the loop went round")
    assert await task is True


async def test_what_the_child_raises_is_a_child_failure() -> None:
    def job() -> None:
        raise ValueError("no plan")

    with pytest.raises(ChildFailed, match="ValueError: no plan"):
        await run_forked(job, timeout_s=30)


def alive(pid: int) -> bool:
    """Whether the process is there at all (a zombie would be)."""
    return Path(f"/proc/{pid}").exists()


async def test_a_child_past_its_time_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    def job() -> None:
        pid_file.write_text(str(os.getpid()))
        time.sleep(60)

    with pytest.raises(ChildFailed, match="no answer within 0.5 s: killed"):
        await run_forked(job, timeout_s=0.5)
    pid = int(pid_file.read_text())
    assert not alive(pid)  # killed and reaped: not even a zombie left


async def test_an_answer_that_cannot_be_sent_is_a_child_failure() -> None:
    with pytest.raises(ChildFailed, match="without an answer"):
        await run_forked(lambda: lambda: None, timeout_s=30)  # a lambda does not pickle
