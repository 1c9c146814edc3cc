"""A broken coordinator costs a Volcano session little and briefly.

Volcano's scheduler is not built here: :mod:`hack.cluster.volcano` calls ``/volcano/*``
as its ``extender`` plugin does (predicate per task and node, 16 at a time; prioritize per
task; every call bounded by ``extender.httpTimeout``), with the arguments of the shipped
``daemonset/scheduler/volcano-scheduler.conf``, against the real coordinator process
watching 20 kwok nodes. A session places one-GPU tasks (4; 24 where the coordinator is
restarted mid-session): once healthy (the baseline), once with the coordinator broken as in
the kube-scheduler fault tests (paused, answering after 3 s, killed and started again,
restarted mid-session), and once after it recovered.
With ``extender.ignorable: true`` every task is placed while it is broken, and the calls are
answered again (bar a few slow ones) within a few sessions once it is back; without
``ignorable`` a hung coordinator places none.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.cluster import volcano
from tests.realcluster import kit
from tests.realcluster.test_real_faults import (
    Coordinator,
    Fault,
    killed,
    late,
    paused,
    restarted,
)

OWNER = "test-volcano-faults"
NODES = [f"rc-vfault-{i:02d}" for i in range(20)]
TASKS = 4
"""A session's tasks: against a hung or late coordinator each one waits out its calls'
timeouts, (20 nodes / 16 + 1) x 500 ms = 1.5 s, whatever else the session holds."""
RESTARTED_TASKS = 24
"""``restarted`` kills the coordinator once 20 tasks are placed (a tenth of the
kube-scheduler test's pods): its sessions place 4 more, against the restarting one."""
RECOVERY_SESSIONS = 3
SLOW_SHARE = 0.05
"""Of a recovered session's calls, at most this share may time out."""
SHIPPED = kit.REPO / "daemonset" / "scheduler" / "volcano-scheduler.conf"


@pytest.fixture(scope="module")
def setup(
    cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, list[dict[str, object]]]]:
    """The coordinator's kubeconfig, and the nodes' ``NodeInfo`` as Volcano sends them."""
    cluster.apply(kit.shipped_rbac())
    for name in NODES:
        cluster.add_node(name, OWNER, gpus=8)
    cluster.wait_ready(NODES, timeout_s=120)
    nodes = [
        volcano.node_info(cluster.api.sanitize_for_serialization(cluster.core.read_node(name)))
        for name in NODES
    ]
    out = tmp_path_factory.mktemp("volcano-faults")
    yield cluster.kubeconfig_for(kit.COORDINATOR_SA, out / "coordinator.kubeconfig"), nodes
    cluster.delete_owned(OWNER)


def tasks(session: str, count: int) -> list[volcano.Task]:
    names = [f"{session}-{i:03d}" for i in range(count)]
    return [volcano.Task(n, n, "default", cpu_m=500, mem_b=2**30, gpus=1) for n in names]


def session(
    settings: volcano.Settings,
    name: str,
    nodes: list[dict[str, object]],
    into: volcano.Session | None = None,
    count: int = TASKS,
) -> volcano.Session:
    done = asyncio.run(volcano.run_session(settings, tasks(name, count), nodes, into))
    p99_ms = done.p99_s() * 1000
    print(f"{name}: {count} tasks x {len(nodes)} nodes in {done.seconds:.2f} s, "
          f"{done.calls} calls, {done.errors} failed, answered p99 {p99_ms:.1f} ms "
          f"{done.last_error}")  # fmt: skip
    return done


@contextlib.contextmanager
def coordinator_of(cluster: kit.Cluster, kubeconfig: Path) -> Iterator[tuple[Coordinator, str]]:
    under_test = Coordinator(cluster, kubeconfig)
    try:
        yield under_test, under_test.start()
    finally:
        under_test.close()


@pytest.mark.parametrize(
    ("fault", "count"),
    [(paused, TASKS), (late, TASKS), (killed, TASKS), (restarted, RESTARTED_TASKS)],
    ids=["paused", "late-3s", "killed", "restarted"],
)
def test_a_broken_coordinator_holds_a_volcano_session_up_only_briefly(
    cluster: kit.Cluster, setup: tuple[Path, list[dict[str, object]]], fault: Fault, count: int
) -> None:
    kubeconfig, nodes = setup
    name = fault.__name__  # type: ignore[attr-defined]
    with coordinator_of(cluster, kubeconfig) as (under_test, url):
        shipped = volcano.shipped_settings(SHIPPED, url + "/volcano")
        assert shipped.ignorable, "the shipped configuration is meant to be ignorable"
        healthy = session(shipped, f"{name}-healthy", nodes, count=count)  # the baseline
        assert all(healthy.placed.values())

        broken = volcano.Session()
        placed = lambda: sum(1 for node in broken.placed.values() if node)  # noqa: E731
        with fault(under_test, url, placed) as called:
            settings = volcano.shipped_settings(SHIPPED, called + "/volcano")
            session(settings, f"{name}-broken", nodes, broken, count)
        assert broken.errors > 0, "the fault did not reach the calls"
        assert len(broken.placed) == count and all(broken.placed.values())
        print(f"{name}: broken session {broken.seconds / healthy.seconds:.1f}x the healthy one")

        # Paused, it has a backlog of calls to answer first: the next sessions catch up.
        # On a loaded machine a healthy call can take longer than httpTimeout now and then.
        for attempt in range(RECOVERY_SESSIONS):
            recovered = session(shipped, f"{name}-recovered-{attempt}", nodes, count=count)
            assert all(recovered.placed.values())
            if recovered.errors <= recovered.calls * SLOW_SHARE:
                break
        assert recovered.errors <= recovered.calls * SLOW_SHARE, (
            f"calls still failing after {RECOVERY_SESSIONS} sessions: {recovered.last_error}"
        )


def test_without_ignorable_a_hung_coordinator_places_no_task(
    cluster: kit.Cluster, setup: tuple[Path, list[dict[str, object]]]
) -> None:
    kubeconfig, nodes = setup
    with coordinator_of(cluster, kubeconfig) as (under_test, url):
        shipped = volcano.shipped_settings(SHIPPED, url + "/volcano")
        strict = dataclasses.replace(shipped, ignorable=False)
        with paused(under_test, url, lambda: 0):
            hung = session(strict, "strict-paused", nodes[:4], count=2)
        assert hung.errors == hung.calls > 0
        assert set(hung.placed.values()) == {None}
