"""What the tenancy rule costs kube-scheduler's filter and prioritize calls.

    python -m hack.bench.tenancy [--nodes 1000] [--pods 30] [--repeats 20]

A live cluster (:class:`~coordinator.live.LiveCluster`, no HTTP) of ``--nodes`` 2-NUMA nodes,
each with ``--pods`` pinned pods of ten tenants bound through the pod watch's entry point
and placed by their agent's report, half on each NUMA node. Each rule (``none``, the
baseline; ``exclusive``; ``split-training-inference``) gets a cluster of its own, built
the same way, and is asked about a pinned 8-CPU pod of one of the tenants over every node:
the median milliseconds per call, the first call after the reports (nothing worked out yet)
apart from the calls after it (each node's occupancy kept until its pods or placements
change).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

import msgspec

from common.clock import SystemClock
from common.schema import PodInfo, PodsSection, Resources
from coordinator.config import CoordinatorSettings, SignalSettings, TenancySettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.state.kubeobjects import pod_request
from coordinator.state.podrequest import PodRequest
from hack.loadgen.reports import build_report

RULES = ("none", "exclusive", "split-training-inference")
CLASSES = ("serving", "training", None)


def _pod(name: str, namespace: str, node: str | None, priority_class: str | None) -> Any:
    requests = {"cpu": "1", "memory": "1Gi"}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": requests, "limits": requests}}]
    }
    if node:
        spec["nodeName"] = node
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}  # fmt: skip


def _info(pod: Any, numa_node: int) -> PodInfo:
    none = Resources(cpu_m=0, mem_b=0, gpu=0, hugepages_b=0, extended={})
    meta = pod["metadata"]
    return PodInfo(
        namespace=meta["namespace"], name=meta["name"], uid=meta["uid"], phase="Running",
        qos_class="Guaranteed", priority=0, priority_class=None, requests=none, limits=none,
        labels={}, numa_nodes=[numa_node],
    )  # fmt: skip


def cluster(rule: str, nodes: int, pods: int) -> tuple[LiveCluster, list[str]]:
    """A cluster of ``nodes`` nodes of ``pods`` placed pods each, under ``rule``."""
    tenancy = TenancySettings(
        rule=rule, training_priority_classes=["training"], inference_priority_classes=["serving"]
    )
    settings = CoordinatorSettings(signals=SignalSettings(tenancy=tenancy))
    live = LiveCluster(settings, SystemClock(), CoordinatorMetrics())
    names = [f"node-{k:05d}" for k in range(nodes)]
    allocatable = {"cpu": "224", "memory": "2Ti", "pods": "110"}
    for name in names:
        live.upsert_node({"metadata": {"name": name}, "status": {"allocatable": allocatable}})
    base = build_report("x", pods=0, gpus=0)
    for k, name in enumerate(names):
        placed = []
        for j in range(pods):
            pod = _pod(f"p{j}-{k}", f"team-{(j + k) % 10}", name, CLASSES[(j + k) % 3])
            live.upsert_pod(pod)
            placed.append(_info(pod, j % 2))
        section = PodsSection(measured_at=base.measured_at, source="apiserver", pods=placed)
        live.apply_report(msgspec.structs.replace(base, node=name, pods=section, pod_usage=None))
    return live, names


def newcomer() -> PodRequest:
    return pod_request(_pod("new", "team-3", None, "serving"), 0)


def measure(rule: str, nodes: int, pods: int, repeats: int) -> dict[str, float]:
    """Median ms per call: ``filter``/``prioritize`` warm, and the first filter cold."""
    live, names = cluster(rule, nodes, pods)
    pod = newcomer()
    gc.collect()  # the clusters built before are garbage: not this call's cost
    started = time.perf_counter()
    live.filter(pod, names)
    out = {"filter cold": (time.perf_counter() - started) * 1e3}
    for verb in ("filter", "prioritize"):
        call = getattr(live, verb)
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            call(pod, names)
            times.append((time.perf_counter() - started) * 1e3)
        out[verb] = statistics.median(times)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    print(f"{args.nodes} nodes x {args.pods} placed pods of 10 tenants; median ms per call")
    print(f"{'rule':26s} {'filter cold':>12s} {'filter':>8s} {'prioritize':>11s}")
    for rule in RULES:
        m = measure(rule, args.nodes, args.pods, args.repeats)
        print(f"{rule:26s} {m['filter cold']:12.1f} {m['filter']:8.1f} {m['prioritize']:11.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
