"""Run a long computation in a forked child process, over a frozen copy of this one.

Why a fork and not a thread or a process pool: the eviction planner's search is Python
that runs for up to a second per plan. In a thread it holds the GIL for most of that, and
every request the event loop serves waits up to a switch interval (5 ms) each time it
wants the GIL back — the extender's answers would slow by milliseconds while plans run. A
process pool would have to pickle the cluster into the worker first: most of a second
for a few tens of thousands of pods, spent on the loop. ``fork`` gives the child the
whole cluster as it is at that moment, copy-on-write, for the cost of copying page
tables (about 10 ms for a 200 MB coordinator), and the child runs on another core
without the parent's GIL. The child is therefore also the frozen snapshot the planner
needs: nothing the watches do afterwards reaches it.

The child only computes: it must not log through handlers, touch the network, or use the
parent's locks (other threads' locks are copied in whatever state they were); it writes
its answer (pickled) to a pipe and leaves with :func:`os._exit`, skipping the parent's
``atexit`` handlers and finalisers. It dies with the parent (``PR_SET_PDEATHSIG``), and
is killed when it runs past ``timeout_s``.

POSIX only (the coordinator runs on Linux). The child's CPU counts against the
coordinator's container: give it room for a second core (see the manifests).
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Final, TypeVar, cast

T = TypeVar("T")

_PR_SET_PDEATHSIG: Final = 1


class ChildFailed(RuntimeError):
    """The child raised, died, or ran past its time; nothing it computed is used."""


async def run_forked(fn: Callable[[], T], timeout_s: float, nice: int = 0) -> T:
    """``fn()`` computed in a forked child; its result must pickle. The fork happens on the
    calling thread (the event loop's, so that the child's copy is taken between two
    callbacks, never in the middle of one); the wait for the answer runs in a worker
    thread, blocked in ``select`` without the GIL. ``nice`` lowers the child's CPU
    priority: where the coordinator has fewer cores than busy threads, the loop wins."""
    read, write = os.pipe()
    gc.freeze()  # the parent's collector then writes to no page the child shares
    try:
        pid = os.fork()
        if pid == 0:  # the child
            os.close(read)
            _child(fn, write, nice)
    finally:
        gc.unfreeze()
    os.close(write)
    return cast(T, await asyncio.to_thread(_collect, pid, read, timeout_s))


def _child(fn: Callable[[], object], write: int, nice: int) -> None:
    code = 0
    try:
        signal.set_wakeup_fd(-1)  # the parent's loop listens there, not ours
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        _die_with_parent()
        if nice:
            os.nice(nice)
        try:
            answer: tuple[bool, object] = (True, fn())
        except BaseException as e:  # noqa: BLE001 - reported to the parent, whatever it is
            answer = (False, f"{type(e).__name__}: {e}")
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(write, view) :]
    except BaseException:  # noqa: BLE001 - nothing may escape into the parent's code
        code = 1
    finally:
        os._exit(code)


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the timeout still bounds the child
        pass


def _collect(pid: int, read: int, timeout_s: float) -> object:
    """The child's answer from the pipe, reaping it; kills it past ``timeout_s``."""
    chunks = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                raise ChildFailed(f"no answer within {timeout_s:g} s: killed")
            chunk = os.read(read, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        _, status = os.waitpid(pid, 0)
    if not chunks:
        raise ChildFailed(f"the child exited without an answer (status {status})")
    ok, value = pickle.loads(b"".join(chunks))
    if not ok:
        raise ChildFailed(str(value))
    return value
