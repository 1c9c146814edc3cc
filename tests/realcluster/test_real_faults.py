"""A broken coordinator costs the real kube-scheduler little and briefly.

200 pending one-GPU pods, 100 kwok nodes with room for all, the real kube-scheduler with
the shipped ``v1`` configuration (``ignorable: true``: when Stowage cannot answer, pods are
placed as if it were not there). The coordinator fails as kube-scheduler starts: paused
(SIGSTOP: connections are accepted and never answered, the worst case), answering only
after 3 s, killed (connections refused) and started again, or restarted while the pods
are being placed. Each time at least half the pods must be bound within 60 s, and every
pod once the coordinator is back. What bounds the cost of a hung or late coordinator is
the shipped ``httpTimeout``: each call waits that long (twice per pod, filter and
prioritize); at 2 s, 14 of 200 pods were bound in a minute.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coordinator.state.podrequest import PodRequest
from hack.cluster import coordinator, scheduling
from hack.cluster.controlplane import Program
from hack.cluster.slowlink import SlowLink
from tests.kit import until
from tests.realcluster import kit

OWNER = "test-faults"
NODES = [f"rc-fault-{i:03d}" for i in range(100)]
PODS = [
    PodRequest(f"job-{i:03d}", cpu_m=500, mem_b=2**30, gpus=1, gpu_milli=1000) for i in range(200)
]
POOL = {scheduling.POOL_LABEL: "faults"}
HALF_WITHIN_S = 60.0
SETTINGS = kit.coordinator_settings("rc-faults")


@pytest.fixture(scope="module")
def kubeconfigs(
    cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path]]:
    cluster.apply(kit.shipped_rbac() + kit.scheduler_rbac())
    for name in NODES:
        cluster.add_node(name, OWNER, gpus=8, labels=POOL)
    cluster.wait_ready(NODES, timeout_s=120)
    out = tmp_path_factory.mktemp("faults")
    yield (
        cluster.kubeconfig_for(kit.COORDINATOR_SA, out / "coordinator.kubeconfig"),
        cluster.kubeconfig_for("stowage-scheduler", out / "scheduler.kubeconfig"),
    )
    cluster.delete_owned(OWNER)


def bound(cluster: kit.Cluster, namespace: str) -> int:
    return sum(1 for p in cluster.core.list_namespaced_pod(namespace).items if p.spec.node_name)


class Coordinator:
    """The coordinator under test, on one port for its whole life (kube-scheduler's
    configuration names it), started again after a kill."""

    def __init__(self, cluster: kit.Cluster, kubeconfig: Path) -> None:
        self._cluster = cluster
        self._kubeconfig = kubeconfig
        self._stack = contextlib.ExitStack()
        self.port = 0
        self.program: Program | None = None
        self.closed = threading.Event()
        """Set on :meth:`close`: a thread that started it lives until then, as a process
        started with ``PR_SET_PDEATHSIG`` is killed when the thread that started it ends."""

    def start(self) -> str:
        program, url = self._stack.enter_context(
            coordinator.running(
                self._cluster.plane, self._kubeconfig, SETTINGS, port=self.port or None
            )
        )
        self.program, self.port = program, int(url.rsplit(":", 1)[1])
        return url

    def signal(self, signum: int) -> None:
        assert self.program is not None
        os.kill(self.program.process.pid, signum)

    def close(self) -> None:
        self.closed.set()
        with contextlib.suppress(ProcessLookupError):
            self.signal(signal.SIGCONT)  # a paused one must be able to stop
        self._stack.close()


Fault = Callable[[Coordinator, str, Callable[[], int]], "contextlib.AbstractContextManager[str]"]
"""``fault(coordinator, url, bound)``: break the coordinator on entry and yield the URL
kube-scheduler calls; recover on exit. ``bound()`` counts the pods placed so far."""


def scheduled_despite(
    cluster: kit.Cluster, kubeconfigs: tuple[Path, Path], namespace: str, fault: Fault
) -> float:
    """Seconds until half the pods were bound with the coordinator broken by ``fault``;
    then the fault ends and every pod must be bound."""
    coordinator_kubeconfig, scheduler_kubeconfig = kubeconfigs
    cluster.namespace(namespace, OWNER)
    under_test = Coordinator(cluster, coordinator_kubeconfig)
    try:
        url = under_test.start()
        scheduling.create_pods(cluster.core, namespace, PODS, POOL)
        count = lambda: bound(cluster, namespace)  # noqa: E731
        with fault(under_test, url, count) as called:
            config = scheduling.scheduler_config(extender_url=called, leader_elect=False)
            started = time.monotonic()
            scheduler = cluster.plane.start_scheduler(config, kubeconfig=scheduler_kubeconfig)
            try:
                until(lambda: count() >= len(PODS) // 2, "half the pods bound", HALF_WITHIN_S)
                half = time.monotonic() - started
            except BaseException:
                scheduler.stop()
                raise
        try:
            until(lambda: count() == len(PODS), "every pod bound", 120)
        finally:
            scheduler.stop()
    finally:
        under_test.close()
    return half


@contextlib.contextmanager
def paused(c: Coordinator, url: str, bound: Callable[[], int]) -> Iterator[str]:
    c.signal(signal.SIGSTOP)
    try:
        yield url
    finally:
        c.signal(signal.SIGCONT)


@contextlib.contextmanager
def killed(c: Coordinator, url: str, bound: Callable[[], int]) -> Iterator[str]:
    c.signal(signal.SIGKILL)
    yield url
    c.start()  # back on the same port


@contextlib.contextmanager
def late(c: Coordinator, url: str, bound: Callable[[], int]) -> Iterator[str]:
    link = SlowLink(c.port, delay_s=3.0)
    with link.serving():
        yield link.url
        link.delay_s = 0.0  # answers in time again


@contextlib.contextmanager
def restarted(c: Coordinator, url: str, bound: Callable[[], int]) -> Iterator[str]:
    """Killed once a tenth of the pods are placed, and started again at once."""
    done = threading.Event()
    failure: list[BaseException] = []

    def restart() -> None:
        try:
            until(lambda: bound() >= len(PODS) // 10, "a tenth of the pods bound", 60)
            c.signal(signal.SIGKILL)
            c.start()
        except BaseException as e:  # told to the test below
            failure.append(e)
        finally:
            done.set()
        c.closed.wait()  # the restarted coordinator dies with this thread

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    yield url
    assert done.wait(120), "the coordinator was not restarted"
    if failure:
        raise failure[0]


@pytest.mark.parametrize(
    "fault", [paused, late, killed, restarted], ids=["paused", "late-3s", "killed", "restarted"]
)
def test_a_broken_coordinator_holds_scheduling_up_only_briefly(
    cluster: kit.Cluster, kubeconfigs: tuple[Path, Path], fault: Fault
) -> None:
    name = fault.__name__  # type: ignore[attr-defined]
    half = scheduled_despite(cluster, kubeconfigs, f"rc-fault-{name}", fault)
    print(f"{name} coordinator: half of {len(PODS)} pods bound in {half:.1f} s")
