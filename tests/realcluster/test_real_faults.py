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

Fed the heaviest reports the schema allows (every node's agent sending the largest report,
13.8 MiB with 4,096 pods, at the agent's interval), the coordinator must keep answering:
there nothing fails open, so no pod may be bound on a node a healthy filter refuses for
what its report says (every GPU fallen off the bus). What keeps it answering is the
ingest body cap (``ingest.max_body_b``): such a report is turned away by its
``Content-Length``, before it is read; decoded, each would hold the event loop the
extender answers on for a third of a second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agent.settings import AgentSettings
from common import codec
from common.schema import is_absent
from coordinator.ingest import CONTENT_TYPE
from coordinator.state.podrequest import PodRequest
from hack.cluster import coordinator, scheduling
from hack.cluster.controlplane import Program
from hack.cluster.slowlink import SlowLink
from hack.loadgen.largest import largest_report
from tests.kit import build_report, until
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

    def __init__(
        self, cluster: kit.Cluster, kubeconfig: Path, settings: Mapping[str, Any] = SETTINGS
    ) -> None:
        self._cluster = cluster
        self._kubeconfig = kubeconfig
        self._settings = settings
        self._stack = contextlib.ExitStack()
        self.port = 0
        self.program: Program | None = None
        self.closed = threading.Event()
        """Set on :meth:`close`: a thread that started it lives until then, as a process
        started with ``PR_SET_PDEATHSIG`` is killed when the thread that started it ends."""

    def start(self) -> str:
        program, url = self._stack.enter_context(
            coordinator.running(
                self._cluster.plane, self._kubeconfig, self._settings, port=self.port or None
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


@dataclasses.dataclass(frozen=True)
class Placed:
    """What one faulted run did."""

    half_s: float
    """Seconds from kube-scheduler's start until half the pods were bound."""
    nodes: dict[str, str]
    """Pod name → the node it was bound to."""
    scheduler_log: Path


def scheduled_despite(
    cluster: kit.Cluster,
    kubeconfigs: tuple[Path, Path],
    namespace: str,
    fault: Fault,
    settings: Mapping[str, Any] = SETTINGS,
) -> Placed:
    """The pods placed with the coordinator (configured with ``settings``) broken by
    ``fault``: half of them must be bound within :data:`HALF_WITHIN_S`; then the fault ends
    and every pod must be bound. The pods are deleted afterwards, so that every run starts
    on empty nodes."""
    coordinator_kubeconfig, scheduler_kubeconfig = kubeconfigs
    cluster.namespace(namespace, OWNER)
    under_test = Coordinator(cluster, coordinator_kubeconfig, settings)
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
        pods = cluster.core.list_namespaced_pod(namespace).items
        placed = Placed(half, {p.metadata.name: p.spec.node_name for p in pods}, scheduler.log)
    finally:
        under_test.close()
        cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    until(lambda: not cluster.core.list_namespaced_pod(namespace).items, "the pods gone", 120)
    return placed


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
    half = scheduled_despite(cluster, kubeconfigs, f"rc-fault-{name}", fault).half_s
    print(f"{name} coordinator: half of {len(PODS)} pods bound in {half:.1f} s")


LOST = NODES[:20]
"""Nodes whose agents report every GPU fallen off the bus: a healthy filter refuses them
every GPU pod, for that reason."""
REPORTING = {**SETTINGS, "ingest": {"auth": "none"}}
"""Reports taken without a token (as in the scheduling benchmark): what is tested is what
a report costs once it is let in, not TokenReview."""
AGENT_INTERVAL_S: float = next(
    f.default for f in dataclasses.fields(AgentSettings) if f.name == "interval_s"
)
"""An agent's report period as shipped."""


def ordinary_report(node: str) -> bytes:
    """A busy 8-GPU node's report (the load generator's); every GPU lost on :data:`LOST`."""
    report = build_report(node, seq=time.time_ns(), now=time.time())
    if node in LOST:
        assert not is_absent(report.gpus)
        lost = [msgspec.structs.replace(d, lost=True) for d in report.gpus.devices]
        report = msgspec.structs.replace(
            report, gpus=msgspec.structs.replace(report.gpus, devices=lost)
        )
    return codec.encode(report)


def post_report(port: int, *body: bytes | memoryview) -> int:
    """POST one report (``body``: its parts in order) as an agent does; its HTTP status,
    or 0 when the coordinator cut the connection while the body was still being sent."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": CONTENT_TYPE, "Content-Length": str(sum(map(len, body)))}
    try:
        connection.request("POST", "/v1/reports", iter(body), headers)
        response = connection.getresponse()
        response.read()
        return response.status
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        connection.close()


class Agents:
    """Every node's agent: the ordinary report of each node every agent interval, and —
    while :meth:`flooding` — the largest report of every node not in :data:`LOST` at the
    same interval, the agents' sends spread over it. Each agent waits for no other: one
    whose report is still in flight when its next is due sends that one beside it."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._stop = threading.Event()
        self.statuses: dict[str, list[int]] = {"ordinary": [], "largest": []}
        self.flood_answered = threading.Event()
        """Set once the coordinator has answered a largest report."""

    def report_all(self) -> None:
        for node in NODES:
            self.statuses["ordinary"].append(post_report(self._port, ordinary_report(node)))

    def _every_interval(
        self, send: Callable[[str], int], kind: str, nodes: list[str], pool: ThreadPoolExecutor
    ) -> None:
        def one(node: str) -> None:
            self.statuses[kind].append(send(node))
            if kind == "largest":
                self.flood_answered.set()

        pause = AGENT_INTERVAL_S / len(nodes)
        while not self._stop.is_set():
            for node in nodes:
                if self._stop.wait(pause):
                    return
                pool.submit(one, node)

    @contextlib.contextmanager
    def flooding(self) -> Iterator[None]:
        template = codec.encode(largest_report(NODES[-1], time.time()))
        name = NODES[-1].encode()
        assert template.count(name) == 1  # the node's name is the one place it differs
        at = template.index(name)
        before, after = memoryview(template)[:at], memoryview(template)[at + len(name) :]

        def largest(node: str) -> int:  # 13.8 MiB sent without a copy per node
            return post_report(self._port, before, node.encode(), after)

        def ordinary(node: str) -> int:
            return post_report(self._port, ordinary_report(node))

        heavy = [n for n in NODES if n not in LOST]
        with ThreadPoolExecutor(2 * len(NODES)) as pool:
            threads = [
                threading.Thread(target=self._every_interval, args=(*args, pool), daemon=True)
                for args in ((ordinary, "ordinary", NODES), (largest, "largest", heavy))
            ]
            for thread in threads:
                thread.start()
            try:
                assert self.flood_answered.wait(60), "no largest report answered"
                yield
            finally:
                self._stop.set()
                for thread in threads:
                    thread.join()


def refused_now(url: str) -> dict[str, str]:
    """The healthy filter's refusals of one of the test's pods on every node (asked as
    kube-scheduler asks, the pod without a uid so that nothing is assumed)."""
    pod = {
        "metadata": {"name": "probe", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {
            "requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}}}]},
    }  # fmt: skip
    body = json.dumps({"Pod": pod, "NodeNames": NODES}).encode()
    connection = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=10)
    try:
        connection.request("POST", "/scheduler/filter", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        answer = json.loads(response.read())
    finally:
        connection.close()
    return dict(answer["FailedAndUnresolvableNodes"] or {})


MOST_FAILED_OPEN = len(PODS) // 20
"""Calls kube-scheduler may give up on while the coordinator answers: a call that takes
longer than ``httpTimeout`` (100 ms) on a machine of two busy cores. Each such pod is placed
as if Stowage were not there, which the ``ignorable`` extender allows. With the body cap
removed, all 200 pods failed open in one run and 48 landed on the lost nodes in another;
with it, 0–4 of 200 failed open in the runs here (load average 7–10)."""


def test_the_heaviest_reports_leave_scheduling_as_it_was(
    cluster: kit.Cluster, kubeconfigs: tuple[Path, Path]
) -> None:
    namespace = "rc-fault-heaviest"
    flood: list[Agents] = []

    @contextlib.contextmanager
    def heaviest_reports(c: Coordinator, url: str, bound: Callable[[], int]) -> Iterator[str]:
        agents = Agents(c.port)
        flood.append(agents)
        agents.report_all()
        refused = refused_now(url)
        assert sorted(refused) == sorted(LOST), refused
        assert all("fell off the bus" in why for why in refused.values()), refused
        with agents.flooding():
            yield url

    run = scheduled_despite(cluster, kubeconfigs, namespace, heaviest_reports, REPORTING)
    (agents,) = flood
    largest, ordinary = agents.statuses["largest"], agents.statuses["ordinary"]
    unanswered = set(scheduling.skipped_filters(run.scheduler_log, namespace))
    print(
        f"heaviest reports: half of {len(PODS)} pods bound in {run.half_s:.1f} s;"
        f" {len(largest)} largest reports sent (answered: {sorted(set(largest))}),"
        f" {len(ordinary)} ordinary ones; {len(unanswered)} pods placed without Stowage"
    )
    on_lost = {pod: node for pod, node in run.nodes.items() if node in LOST}
    assert len(unanswered) <= MOST_FAILED_OPEN, f"{len(unanswered)} placed without Stowage"
    assert set(on_lost) <= unanswered, f"Stowage let them onto lost GPUs: {on_lost}"
    assert largest, "no largest report was sent while the pods were placed"
    assert set(largest) <= {0, 413}, "the largest report was read"
    assert set(ordinary) == {200}
