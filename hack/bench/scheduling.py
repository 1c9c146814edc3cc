"""What Stowage costs the real kube-scheduler: pods/s with and without the extender.

    python -m hack.bench.scheduling [--nodes 500[,5000]] [--pods N] [--seed 7]
                                    [--profile DIR]

For each size, a real control plane (``hack.cluster``) holds that many kwok nodes sampled
from the openb trace (its GPU models and counts) and the trace's pods for
``stowage-scheduler`` (shuffled by the seed, cloned until they ask for every GPU, the first
``--pods`` of them: twice the nodes by default). kube-scheduler 1.37 then runs twice, each
started only once all its pods exist:

* **plain**: the default profile, no extender (what a cluster has without Stowage);
* **stowage**: the shipped ``daemonset/scheduler/v1`` configuration, its extender pointed
  at a coordinator on 127.0.0.1 (``percentageOfNodesToScore`` as shipped: unset).

Leader election is off in both (it changes nothing per pod, and a second scheduler would
otherwise wait for the first one's Lease), and both may send the API server 1,000
requests/s (:data:`CLIENT`). The coordinator gets a report for every node
every 10 s, as agents send them (the load generator's full GPU-node report), so it scores
on data rather than on "no report yet"; it takes them without authentication here.

Pods/s is the scheduler's own account: the span between the first and the last of its
``Scheduled`` Events (microsecond ``eventTime``), over the pods it bound. The cycle time
is its ``scheduler_scheduling_algorithm_duration_seconds`` (filter and score, extender
calls included, mean per attempt); the coordinator's per-verb time its
``stowage_request_duration_seconds``.
Everything runs on this machine, so both runs share its cores with the control plane:
compare the two figures of one run, not runs on different machines.

With ``--profile DIR`` py-spy samples the coordinator through the Stowage run (100 Hz,
the thread holding the GIL only: a thread waiting for a lock, a socket or the next event
is not work) into ``DIR/coordinator-<nodes>.txt`` (collapsed stacks, for a flame graph),
and the result gains the share of those samples in each part of its work (:data:`PARTS`)
and the coordinator's CPU seconds over the run (from its creating the pods to the end of
the settling), per pod bound.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from kubernetes import client, config
from prometheus_client.parser import text_string_to_metric_families

from coordinator.state.podrequest import PodRequest
from hack.cluster import coordinator, manifests, scheduling
from hack.cluster.build import KUBERNETES_RELEASE, ensure_built
from hack.cluster.controlplane import ControlPlane, running, scrape
from hack.demo.workload import sample_nodes
from hack.loadgen.reports import CONTENT_TYPE, Bodies
from hack.sim import arrivals, trace

POOL: Final = {scheduling.POOL_LABEL: "bench"}
REPORT_EVERY_S: Final = 10.0
SETTLE_S: Final = 900.0
POD_LIST: Final = trace.OPENB / "openb_pod_list_default.csv"
NODE_LIST: Final = trace.OPENB / trace.OPENB_GPU_NODES
VERBS: Final = ("filter", "prioritize", "preempt")
CLIENT: Final = {"qps": 1000, "burst": 1000}
"""kube-scheduler's API client limit in both runs. Its default (50 requests/s, bursts of
100) caps binding at about 50 pods/s with or without an extender, which is then all a
run measures; the benchmark is after the scheduler's own cost."""
PLAIN: Final = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "stowage-scheduler"}],
}


@dataclass(frozen=True)
class Run:
    """One scheduler run: pods bound and how fast, by the scheduler's own account."""

    bound: int
    pending: int
    pods_per_s: float
    attempt_ms: float
    """Mean time of the scheduling algorithm per attempt (filter and score)."""
    verbs_ms: dict[str, tuple[int, float]]
    """Coordinator: verb → (calls, mean ms); empty for the plain run."""
    plugins_ms: dict[str, float]
    """Of ``attempt_ms``, the mean time in each extension point of kube-scheduler's own
    plugins (:data:`POINTS`); the rest of it (:attr:`rest_ms`) is the extender's calls
    and the algorithm's own bookkeeping (its snapshot of the cache, picking the host)."""
    filters_given_up: int
    """Filter calls the scheduler gave up on (past ``httpTimeout``: it then placed the pod
    as if Stowage were not there, prioritize asked if more than one node was feasible), by
    its log (:func:`hack.cluster.scheduling.skipped_filters`); 0 for the plain run."""

    @property
    def rest_ms(self) -> float:
        return round(self.attempt_ms - sum(self.plugins_ms.values()), 2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hack.bench.scheduling", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--nodes", default="500", help="node counts, comma-separated (default: 500)"
    )
    parser.add_argument(
        "--pods", type=int, default=0, help="pods per run (default: twice the nodes)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--profile", type=Path, default=None, help="sample the coordinator with py-spy into DIR"
    )
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",")]
    bin_dir = ensure_built()
    results = []
    for size in sizes:
        with (
            tempfile.TemporaryDirectory(prefix="stowage-bench-") as scratch,
            running(Path(scratch), bin_dir) as plane,
        ):
            results.append(
                measure(plane, size, args.pods or 2 * size, args.seed, profile=args.profile)
            )
    print(json.dumps(results, indent=2))
    return 0


def measure(
    plane: ControlPlane,
    size: int,
    count: int,
    seed: int,
    labels: Mapping[str, str] = POOL,
    profile: Path | None = None,
) -> dict[str, Any]:
    """One size: both runs on ``size`` new nodes (named ``bench-…``, labelled ``labels``,
    which must hold :data:`POOL`), ``count`` pods each; their figures as a dict. With
    ``profile`` (a directory) the coordinator is sampled through the Stowage run."""
    api = config.new_client_from_config(config_file=str(plane.kubeconfig))
    core = client.CoreV1Api(api)
    plane.apply(
        manifests.rbac(manifests.COORDINATOR_AND_AGENT) + manifests.rbac(manifests.SECOND_SCHEDULER)
    )
    sampled = sample_nodes(trace.load_nodes(NODE_LIST), size, seed)
    rounds = range(-(-size // len(sampled)))  # the trace has fewer: clone its mix
    specs = [dataclasses.replace(s, name=f"bench-{s.name}-{k}") for k in rounds for s in sampled]
    specs = specs[:size]
    pods = arrivals.build(trace.load_pods(POD_LIST), specs, seed, 1.0).pods[:count]
    scheduling.create_nodes(core, specs, labels)
    scheduling.wait_ready(core, [s.name for s in specs], timeout_s=600)
    ns = coordinator.NAMESPACE
    as_scheduler = plane.kubeconfig_for(
        "stowage-scheduler", ns, plane.root / "scheduler.kubeconfig"
    )
    as_coordinator = plane.kubeconfig_for(
        coordinator.SERVICE_ACCOUNT, ns, plane.root / "coordinator.kubeconfig"
    )
    gpus = sum(s.gpus for s in specs)
    say(f"{size} nodes ({gpus} GPUs), {len(pods)} pods; Kubernetes {KUBERNETES_RELEASE}")
    plain_config = {**PLAIN, "clientConnection": CLIENT}
    plain = one_run(plane, api, "bench-plain", plain_config, pods, as_scheduler, None)
    settings = {"kube": {"namespace": ns}, "ingest": {"auth": "none"}}
    profiled: dict[str, Any] = {}
    with coordinator.running(plane, as_coordinator, settings) as (program, url):
        reporting = Reporter(url, [s.name for s in specs])
        reporting.start()
        try:
            shipped = scheduling.scheduler_config(extender_url=url, leader_elect=False)
            shipped["clientConnection"] = CLIENT
            pid = program.process.pid
            out = None if profile is None else profile / f"coordinator-{size}.txt"
            with py_spy(pid, out), cpu_seconds(pid) as cpu:
                stowage = one_run(plane, api, "bench-stowage", shipped, pods, as_scheduler, url)
            if out is not None:
                profiled = {
                    "samples": str(out),
                    "cpu_s": round(cpu[0], 2),
                    "cpu_ms_per_pod": round(1000 * cpu[0] / max(1, stowage.bound), 2),
                    "parts_pct": parts(out),
                }
        finally:
            reporting.stop()
    ratio = stowage.pods_per_s / plain.pods_per_s if plain.pods_per_s else 0.0
    say(
        f"  plain {plain.pods_per_s:.0f} pods/s, with Stowage {stowage.pods_per_s:.0f} pods/s"
        f" = {ratio:.2f}x; attempt {plain.attempt_ms:.1f} -> {stowage.attempt_ms:.1f} ms"
        f" (+{stowage.attempt_ms - plain.attempt_ms:.1f}; outside the plugins"
        f" {plain.rest_ms:.2f} -> {stowage.rest_ms:.2f}); coordinator "
        + ", ".join(f"{v} {n} x {ms:.2f} ms" for v, (n, ms) in stowage.verbs_ms.items())
    )
    if profiled:
        say(
            f"  coordinator CPU {profiled['cpu_s']} s ({profiled['cpu_ms_per_pod']} ms a pod): "
            + ", ".join(f"{part} {pct} %" for part, pct in profiled["parts_pct"].items())
        )
    return {
        "nodes": size, "gpus": gpus, "pods": len(pods),
        "reports_sent": reporting.sent, "reports_refused": reporting.refused,
        "plain": {**vars(plain), "rest_ms": plain.rest_ms},
        "stowage": {**vars(stowage), "rest_ms": stowage.rest_ms}, "ratio": round(ratio, 3),
        "attempt_added_ms": round(stowage.attempt_ms - plain.attempt_ms, 2),
        **({"profile": profiled} if profiled else {}),
    }  # fmt: skip


def one_run(
    plane: ControlPlane, api: Any, namespace: str, config_: dict[str, Any], pods: list[PodRequest],
    kubeconfig: Path, coordinator_url: str | None,
) -> Run:  # fmt: skip
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    scheduling.wait_default_service_account(core, namespace)
    count = scheduling.create_pods(core, namespace, pods, POOL)
    scheduler = plane.start_scheduler(config_, kubeconfig=kubeconfig)
    try:
        settled = scheduling.settle(core, namespace, count, SETTLE_S)
        metrics = scrape(scheduler.url, plane.admin_token)
    finally:
        scheduler.stop()
    times = scheduled_at(api, namespace)
    rate = (
        (len(times) - 1) / (times[-1] - times[0])
        if len(times) > 1 and times[-1] > times[0]
        else 0.0
    )
    verbs = {}
    if coordinator_url is not None:
        for verb in VERBS:
            calls = coordinator.metric(
                coordinator_url, "stowage_request_duration_seconds_count", {"verb": verb}
            )
            total = coordinator.metric(
                coordinator_url, "stowage_request_duration_seconds_sum", {"verb": verb}
            )
            if calls:
                verbs[verb] = (int(calls), round(1000 * total / calls, 3))
    return Run(
        len(settled.bound),
        len(settled.pending),
        round(rate, 1),
        round(attempt_ms(metrics), 2),
        verbs,
        plugins_ms(metrics),
        len(scheduling.skipped_filters(scheduler.log, namespace)),
    )


def scheduled_at(api: Any, namespace: str) -> list[float]:
    """Unix seconds of every ``Scheduled`` Event in ``namespace``, sorted. Read as JSON: the
    client's typed Event refuses the Events other writers leave without ``eventTime``."""
    response = client.EventsV1Api(api).list_namespaced_event(namespace, _preload_content=False)
    return sorted(
        datetime.fromisoformat(e["eventTime"]).timestamp()
        for e in json.loads(response.data)["items"]
        if e.get("reason") == "Scheduled" and e.get("eventTime")
    )


def attempt_ms(metrics: str) -> float:
    """Mean ``scheduler_scheduling_algorithm_duration_seconds``: one pod's filter and score
    (extender calls included), the part of its cycle that holds up the next pod — not the
    binding, which runs on its own."""
    total = count = 0.0
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "scheduler_scheduling_algorithm_duration_seconds_sum":
                total += sample.value
            elif sample.name == "scheduler_scheduling_algorithm_duration_seconds_count":
                count += sample.value
    return 1000 * total / count if count else 0.0


POINTS: Final = ("PreFilter", "Filter", "PreScore", "Score")
"""The extension points of kube-scheduler's plugins inside its scheduling algorithm."""


def plugins_ms(metrics: str) -> dict[str, float]:
    """Per scheduling attempt, the mean milliseconds in each of :data:`POINTS`
    (``scheduler_framework_extension_point_duration_seconds``, every status)."""
    total = dict.fromkeys(POINTS, 0.0)
    attempts = 0.0
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "scheduler_scheduling_algorithm_duration_seconds_count":
                attempts += sample.value
            elif sample.name == "scheduler_framework_extension_point_duration_seconds_sum":
                point = sample.labels.get("extension_point", "")
                if point in total:
                    total[point] += sample.value
    return {p: round(1000 * t / attempts, 3) if attempts else 0.0 for p, t in total.items()}


class Reporter:
    """Every node's report every :data:`REPORT_EVERY_S`, spread over the interval, as a
    fleet of agents sends them (one keep-alive connection)."""

    def __init__(self, url: str, nodes: list[str]) -> None:
        self._host, self._port = url.removeprefix("http://").split(":")
        self._nodes = nodes
        self._bodies = Bodies(nodes, now=time.time(), refresh=0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0
        self.refused = 0

    def start(self) -> None:
        self._send_round(spread=False)  # every node known before the first pod
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._send_round(spread=True)

    def _send_round(self, spread: bool) -> None:
        connection = http.client.HTTPConnection(self._host, int(self._port), timeout=10)
        pause = REPORT_EVERY_S / len(self._nodes) if spread else 0.0
        seq = int(time.time())
        for i in range(len(self._nodes)):
            if self._stop.wait(pause) if pause else self._stop.is_set():
                break
            body = self._bodies.body(i, seq, time.time())
            connection.request("POST", "/v1/reports", body, {"Content-Type": CONTENT_TYPE})
            response = connection.getresponse()
            response.read()
            self.sent += 1
            self.refused += response.status != 200
        connection.close()


PY_SPY: Final = Path(sys.executable).with_name("py-spy")
PARTS: Final = (
    ("filter", "filter_nodes"),
    ("prioritize", "prioritize_nodes"),
    ("preempt", "preempt ("),
    ("reports", "handle_report"),
    ("watches", "watches.py"),
    ("metrics", "generate_latest"),
    ("garbage collection", "(garbage collection)"),
)
"""The coordinator's work by what a sample's stack holds (the first that matches): each
verb's handler, ingest, the Node/Pod watches' threads, ``/metrics``; the rest is the HTTP
server and the event loop around them, and background tasks."""


@contextlib.contextmanager
def py_spy(pid: int, out: Path | None) -> Iterator[None]:
    """py-spy sampling ``pid`` into ``out`` while inside (nothing without ``out``)."""
    if out is None:
        yield
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [str(PY_SPY), "record", "--pid", str(pid), "--rate", "100", "--nonblocking", "--gil",
            "--format", "raw", "--output", str(out)]  # fmt: skip
    spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its samples and ends
        _, err = spy.communicate(timeout=60)
        if spy.returncode not in (0, -signal.SIGINT):
            raise RuntimeError(f"py-spy: {err.decode(errors='replace')[-2000:]}")


@contextlib.contextmanager
def cpu_seconds(pid: int) -> Iterator[list[float]]:
    """The CPU seconds (user and system) process ``pid`` used while inside, in the list
    yielded (filled on the way out)."""
    ticks = os.sysconf("SC_CLK_TCK")

    def used() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime

    out = [0.0]
    start = used()
    yield out
    out[0] = used() - start


def parts(samples: Path) -> dict[str, float]:
    """Percent of the samples in each of :data:`PARTS`, and the rest as ``server``."""
    counts: Counter[str] = Counter()
    for line in samples.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        part = next((name for name, frame in PARTS if frame in stack), "server")
        counts[part] += int(n)
    total = sum(counts.values()) or 1
    return {name: round(100 * n / total, 1) for name, n in counts.most_common()}


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
