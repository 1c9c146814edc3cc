"""A sweep on Dask distributed: the simulator's calls as tasks of a Dask cluster, so a sweep
of a thousand runs spreads over every machine that runs a worker.

    stowage sim … --scheduler tcp://HOST:8786    # a cluster started with dask-scheduler
    stowage sim … --scheduler                    # a LocalCluster of --jobs workers

Every worker needs this repository importable (the same version as the client: the calls
are pickled by reference to :mod:`hack.sim.main`) and the trace files at the paths the
client names. Workers report pods decided through a Dask ``Queue`` named for the sweep,
every :data:`hack.sim.replay.PROGRESS_EVERY` pods of a run, so one progress bar counts
the pods of all runs on all machines. Results come back in call order: each call is
deterministic in its arguments (its seed included), so the rows equal a serial run's.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final

from distributed import Client, LocalCluster, Queue, wait

from common.errors import ConfigError
from hack.sim import main

LOCAL: Final = "local"
"""``--scheduler`` without an address: a ``LocalCluster`` on this machine."""
POLL_S: Final = 0.2
CONNECT_S: Final = 30
"""How long to keep trying a scheduler's address before giving up."""


def run(
    calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]],
    scheduler: str,
    jobs: int,
    total_pods: int,
    show: bool | None,
) -> tuple[list[Any], int]:
    """Each ``fn(*args)`` as a task on the cluster at ``scheduler`` (or a new LocalCluster
    of ``jobs`` single-threaded workers), results in call order, and the pods the workers
    reported deciding; one bar counts them against ``total_pods``."""
    with contextlib.ExitStack() as stack:
        if scheduler == LOCAL:
            cluster = LocalCluster(
                n_workers=max(1, jobs),
                threads_per_worker=1,
                processes=True,
                # A port the kernel picks: None means dask's fixed 8787, which a second
                # sweep on the machine (the other test worker) then finds taken.
                dashboard_address=":0",
            )
            stack.enter_context(cluster)
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(scheduler, timeout=CONNECT_S))
            except (OSError, ValueError, TypeError) as e:
                raise ConfigError(
                    f"--scheduler {scheduler!r}: no Dask scheduler there ({e})"
                ) from e
        reports = Queue(f"stowage-sim-{uuid.uuid4().hex}", client=client)
        bar = stack.enter_context(main._bar(total_pods, show))
        futures = [client.submit(_call, reports.name, fn, args, pure=False) for fn, args in calls]
        counted = 0
        pending = futures
        while pending:
            with contextlib.suppress(TimeoutError):
                wait(pending, timeout=POLL_S, return_when="FIRST_COMPLETED")
            pending = [f for f in pending if not f.done()]
            counted += _drain(reports, bar)
        results = client.gather(futures)
        counted += _drain(reports, bar)  # a task's last put is in before its result
    return results, counted


def _drain(reports: Queue, bar: Any) -> int:
    waiting = reports.qsize()
    got = sum(reports.get(batch=waiting)) if waiting else 0
    bar.update(got)
    return int(got)


def _call(queue: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """On a worker: ``fn(*args)`` with the simulator's progress going to the sweep's queue."""
    main._progress_here.queue = Queue(queue)
    try:
        return fn(*args)
    finally:
        main._progress_here.queue = None
