"""Every verb on the largest report the schema admits, next to an ordinary report.

    python -m hack.bench.largest_report [--repeats 5]

For each of two nodes — one sending the largest report the schema admits
(:func:`hack.loadgen.largest.largest_report`: 64 GPUs on a full NVLink mesh, every list at
its maximum, 13.8 MiB), one sending an ordinary busy 8-GPU node's report
(:func:`hack.loadgen.reports.build_report`, the baseline) — a coordinator (``make_app``,
and ``make_debug_app`` for ``/debug`` and ``/ui``; no Kubernetes client) serves a cluster
of that one node, with pods bound to it through the pod watch's entry point: a quarter of
its GPUs taken by one-GPU pods, most of its CPU by 14 low-priority CPU pods. The body
limit is raised to let the largest report in (an operator may raise it; the default 1 MiB
refuses it with 413). Then every verb that reads what the report brought is called over
HTTP, as its caller calls it (:func:`calls`):
ingest, kube-scheduler's filter, prioritize (a pod of 8 GPUs — 6 on the ordinary node,
where 6 are free — and a pod asking for half the free GPUs) and preempt (a critical pod
that needs seven of the CPU pods evicted),
Volcano's predicate and prioritize, ``/debug/explain``, ``/debug/plan`` (preemption and
memory pressure), ``/debug/colocation``, ``/debug/nodes``, ``/ui``, ``/metrics`` and
``/healthz``.

Each repeat sends the report again first (which drops the node's cached scores) and
clears the memo of linked-GPU choices, so every call is as cold as the first after a
report. Prints a table of the median milliseconds per verb, client-measured over
127.0.0.1, for both reports and their ratio, then one JSON line.
``tests/coordinator/test_largest_report.py`` makes the same calls and checks each answer.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from common import codec
from common.clock import Clock, SystemClock
from common.schema import NodeReport
from coordinator.app import make_app, make_debug_app
from coordinator.auth import StaticTokens
from coordinator.config import (
    CoordinatorSettings,
    EvictionSettings,
    IngestSettings,
    PolicySettings,
)
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.nodeview import NODE_VIEW
from coordinator.scoring import linkedgpus
from coordinator.services import Services
from hack.loadgen.largest import largest_report
from hack.loadgen.reports import build_report

MIB: Final = 2**20
GIB: Final = 2**30
MAX_BODY_B: Final = 32 * MIB
"""Room for the largest report (13.8 MiB)."""
TOKEN: Final = "token-of-the-node"
CPU_PODS: Final = 14
NAMESPACE: Final = "tenant"
CRITICAL: Final = 2_000_000_000


@dataclass(frozen=True, slots=True)
class Kind:
    """A node and the report its agent sends."""

    name: str
    cpus: int
    memory_gi: int
    gpus: int
    report: Callable[[str, float, int], NodeReport]

    @property
    def gpu_pods(self) -> int:
        """One-GPU pods bound to it: a quarter of its GPUs."""
        return self.gpus // 4

    @property
    def free_gpus(self) -> int:
        return self.gpus - self.gpu_pods

    @property
    def pod_gpus(self) -> int:
        """GPUs of the pods the calls ask about: 8, or every free GPU where fewer are."""
        return min(8, self.free_gpus)

    @property
    def cpu_pod_cpus(self) -> int:
        """CPUs of each CPU pod: 14 of them take 7/8 of the node's CPU."""
        return self.cpus // 16


LARGEST: Final = Kind(
    "largest", 1024, 16384, 64, lambda node, now, seq: largest_report(node, now, seq=seq)
)
ORDINARY: Final = Kind(
    "ordinary", 224, 2048, 8, lambda node, now, seq: build_report(node, seq=seq, now=now)
)
KINDS: Final = (LARGEST, ORDINARY)


def node_json(kind: Kind) -> dict[str, Any]:
    allocatable = {
        "cpu": str(kind.cpus),
        "memory": f"{kind.memory_gi}Gi",
        "nvidia.com/gpu": str(kind.gpus),
        "pods": "110",
    }
    return {
        "metadata": {"name": kind.name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def pod_json(
    name: str,
    *,
    cpu: int = 1,
    gpus: int = 0,
    priority: int = 0,
    node: str | None = None,
    uid: bool = True,
) -> dict[str, Any]:
    """A Pod; bound and Running on ``node`` when given. Without ``uid`` it is a pod as a
    scheduler asks about it but that no answer assumes anywhere, so calls can repeat."""
    resources: dict[str, Any] = {"requests": {"cpu": str(cpu), "memory": "1Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "main", "image": "x", "resources": resources}],
    }
    if node is not None:
        spec["nodeName"] = node
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if uid:
        meta["uid"] = f"uid-{name}"
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def bound_pods(kind: Kind) -> list[dict[str, Any]]:
    gpu = [pod_json(f"gpu-{k}", gpus=1, node=kind.name) for k in range(kind.gpu_pods)]
    cpu = [pod_json(f"cpu-{k}", cpu=kind.cpu_pod_cpus, node=kind.name) for k in range(CPU_PODS)]
    return gpu + cpu


def wanted(kind: Kind) -> dict[str, dict[str, Any]]:
    """The pending pods the calls ask about, by role."""
    return {
        "gpus": pod_json("want-gpus", gpus=kind.pod_gpus),
        "half": pod_json("want-half", gpus=kind.free_gpus // 2),
        # Half the node's CPU: more than is free, so seven CPU pods must go.
        "preemptor": pod_json(
            "preemptor", cpu=kind.cpus // 2, gpus=kind.pod_gpus, priority=CRITICAL
        ),
    }


MAX_VICTIMS: Final = 256
"""Per cycle, node and namespace: more than any plan over the pods :func:`bound_pods` puts
on a node can take."""


def services_for(kind: Kind, clock: Clock) -> Services:
    """The coordinator's services over a cluster of the one node of ``kind``, with its pods
    from the watch (bound ones and the pending ones the calls ask about)."""
    settings = CoordinatorSettings(
        policy=PolicySettings(name="stowage"),
        # Caps as wide as the node's pods: what is measured is the search over every one
        # of them, which the default caps (a plan of at most 4 victims a node) would cut.
        evictions=EvictionSettings(
            max_per_cycle=MAX_VICTIMS,
            max_per_node_per_cycle=MAX_VICTIMS,
            max_per_namespace_per_cycle=MAX_VICTIMS,
            eviction_burst=MAX_VICTIMS,
        ),
        ingest=IngestSettings(
            auth="static", static_tokens={TOKEN: kind.name}, max_body_b=MAX_BODY_B
        ),
    )
    metrics = CoordinatorMetrics()
    cluster = LiveCluster(settings, clock, metrics)
    cluster.replace_nodes([node_json(kind)])
    cluster.replace_pods([*bound_pods(kind), *wanted(kind).values()])
    cluster.budgets.replace([])
    return Services(
        settings=settings,
        clock=clock,
        metrics=metrics,
        cluster=cluster,
        authenticator=StaticTokens({TOKEN: kind.name}),
    )


@dataclass(frozen=True, slots=True)
class Call:
    """One request, as its caller sends it."""

    verb: str
    method: str
    path: str
    body: bytes | None = None
    content_type: str = "application/json"
    token: str | None = None
    debug: bool = False
    """Asked of the debug listener (:func:`coordinator.app.make_debug_app`)."""

    def data(self) -> io.BytesIO | None:
        """The body as a stream: aiohttp sends a large ``bytes`` body with a warning."""
        return None if self.body is None else io.BytesIO(self.body)

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": self.content_type} if self.body is not None else {}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


def _request_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as a scheduler sends it, without its uid: no answer assumes it."""
    meta = {k: v for k, v in pod["metadata"].items() if k != "uid"}
    return {**pod, "metadata": meta}


def _json(body: Any) -> bytes:
    return json.dumps(body).encode()


def calls(kind: Kind, report: bytes) -> list[Call]:
    """Every verb's call about the node of ``kind`` (``report``: its encoded report),
    ingest first."""
    name = kind.name
    pods = wanted(kind)
    some, half = _request_pod(pods["gpus"]), _request_pod(pods["half"])
    victims = [{"UID": f"uid-{p['metadata']['name']}"} for p in bound_pods(kind)]
    preempt = {
        "Pod": _request_pod(pods["preemptor"]),
        "NodeNameToMetaVictims": {name: {"Pods": victims, "NumPDBViolations": 0}},
    }
    task = {"UID": "", "Pod": some}
    explain = f"/debug/explain?pod={NAMESPACE}/want-gpus&node={name}"
    return [
        Call("ingest", "POST", "/v1/reports", report, "application/msgpack", TOKEN),
        Call("filter", "POST", "/scheduler/filter", _json({"Pod": some, "NodeNames": [name]})),
        Call(
            "prioritize",
            "POST",
            "/scheduler/prioritize",
            _json({"Pod": some, "NodeNames": [name]}),
        ),
        Call(
            "prioritize half",
            "POST",
            "/scheduler/prioritize",
            _json({"Pod": half, "NodeNames": [name]}),
        ),
        Call("preempt", "POST", "/scheduler/preempt", _json(preempt)),
        Call(
            "volcano predicate",
            "POST",
            "/volcano/predicate",
            _json({"task": task, "node": {"Name": name}}),
        ),
        Call(
            "volcano prioritize",
            "POST",
            "/volcano/prioritize",
            _json({"task": task, "nodes": [{"Name": name}]}),
        ),
        Call("explain", "GET", explain, debug=True),
        Call("plan preemption", "GET", f"/debug/plan?pod={NAMESPACE}/preemptor", debug=True),
        Call("plan pressure", "GET", f"/debug/plan?node={name}", debug=True),
        Call("colocation", "GET", f"/debug/colocation?node={name}", debug=True),
        Call("nodes", "GET", "/debug/nodes", debug=True),
        Call("ui", "GET", "/ui", debug=True),
        Call("metrics", "GET", "/metrics"),
        Call("healthz", "GET", "/healthz"),
    ]


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    content_type: str
    body: bytes
    seconds: float


async def send(session: ClientSession, base: str, call: Call) -> Answer:
    started = time.perf_counter()
    url = base + call.path
    async with session.request(call.method, url, data=call.data(), headers=call.headers()) as r:
        body = await r.read()
    return Answer(r.status, r.content_type, body, time.perf_counter() - started)


def encoded_report(kind: Kind, clock: Clock, seq: int = 1) -> bytes:
    return codec.encode(kind.report(kind.name, clock.wall(), seq))


async def measure(kind: Kind, repeats: int) -> dict[str, list[float]]:
    """Milliseconds of each verb's call, ``repeats`` times, about the node of ``kind``."""
    clock = SystemClock()
    services = services_for(kind, clock)
    report = encoded_report(kind, clock)
    app = make_app(services)
    server, debug = TestServer(app), TestServer(make_debug_app(services, app[NODE_VIEW]))
    await server.start_server()
    await debug.start_server()
    out: dict[str, list[float]] = {}
    try:
        async with ClientSession() as session:
            base, debug_base = str(server.make_url("")), str(debug.make_url(""))
            for _ in range(repeats):
                linkedgpus.best_linked.cache_clear()
                for call in calls(kind, report):
                    answer = await send(session, debug_base if call.debug else base, call)
                    if answer.status != 200:
                        raise RuntimeError(f"{kind.name} {call.verb}: {answer.status}")
                    out.setdefault(call.verb, []).append(answer.seconds * 1000)
    finally:
        await debug.close()
        await server.close()
    return out


def run(repeats: int) -> dict[str, Any]:
    measured = {kind.name: asyncio.run(measure(kind, repeats)) for kind in KINDS}
    clock = SystemClock()
    sizes = {kind.name: len(encoded_report(kind, clock)) for kind in KINDS}
    verbs = list(measured[LARGEST.name])
    medians = {
        verb: {name: statistics.median(measured[name][verb]) for name in measured} for verb in verbs
    }
    return {"repeats": repeats, "report_bytes": sizes, "median_ms": medians}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats: at least 1")
    out = run(args.repeats)
    sizes = out["report_bytes"]
    print(
        f"report: largest {sizes[LARGEST.name] / MIB:.1f} MiB, "
        f"ordinary {sizes[ORDINARY.name] / 1024:.0f} KiB; median of {args.repeats}, ms"
    )
    print(f"{'verb':22}{'largest':>10}{'ordinary':>10}{'ratio':>8}")
    for verb, ms in out["median_ms"].items():
        big, small = ms[LARGEST.name], ms[ORDINARY.name]
        print(f"{verb:22}{big:>10.2f}{small:>10.2f}{big / small:>8.1f}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
