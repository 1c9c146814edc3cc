"""The autoscaling hints' round, against the view it is worked out over, in one run.

    python -m hack.bench.scale_hints [--nodes 2000] [--pods-per-node 10] [--queues 50]

Builds a live cluster of ``--nodes`` nodes of 222 CPUs in four node pools
(``karpenter.sh/nodepool``), two of them of 8-GPU nodes whose GPUs are all held, each
node with ``--pods-per-node`` running pods spread over
``--queues`` namespaces, every namespace bounded by a ResourceQuota and holding five
pending pods (a GPU pool selected by half of them, one pod selecting a pool no node has),
through the coordinator's own entry points; then times, ``--repeats`` times each,
alternating:

* **baseline**: :func:`coordinator.autoscale.hints.view_of`, the copy taken on the event
  loop each round (every node, pod and group read once);
* **plan**: :func:`coordinator.autoscale.hints.plan` over it, in the worker thread: every
  queue's gap, group and count, and the deadlocks.

Prints the medians in milliseconds, twice each (the second pair shows the noise), and
what the plan found.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from coordinator.autoscale import hints
from coordinator.autoscale.capacity import Capacities
from coordinator.config import AutoscaleSettings, CoordinatorSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from hack.bench.ingest import gpu_node
from hack.bench.patrol_sample import SteppedClock

POOL = "karpenter.sh/nodepool"
POOLS = ("gpu-a", "gpu-b", "cpu-a", "cpu-b")


def pod(name: str, namespace: str, node: str | None, gpus: int, pool: str | None) -> dict[str, Any]:
    resources = {
        "requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": str(gpus)},
        "limits": {"nvidia.com/gpu": str(gpus)},
    }
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": resources}]}
    if node is not None:
        spec["nodeName"] = node
    if pool is not None:
        spec["nodeSelector"] = {POOL: pool}
    meta = {"name": name, "namespace": namespace, "uid": f"u-{namespace}-{name}"}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    clock = SteppedClock()
    cluster = LiveCluster(CoordinatorSettings(), clock, CoordinatorMetrics())
    names = [f"gpu-node-{i:05d}" for i in range(args.nodes)]
    nodes = []
    for i, name in enumerate(names):
        node = gpu_node(name)
        node["metadata"]["labels"][POOL] = POOLS[i % len(POOLS)]
        if POOLS[i % len(POOLS)].startswith("cpu"):
            for amounts in node["status"].values():
                del amounts["nvidia.com/gpu"]
        nodes.append(node)
    cluster.replace_nodes(nodes)
    capacities = Capacities()
    capacities.replace_quotas(
        {
            "metadata": {"namespace": f"ns-{k}", "name": "q"},
            "status": {"hard": {"requests.cpu": "2000", "requests.nvidia.com/gpu": "200"}},
        }
        for k in range(args.queues)
    )
    for i, name in enumerate(names):
        for j in range(args.pods_per_node):
            k = (i * args.pods_per_node + j) % args.queues
            gpus = 1 if POOLS[i % len(POOLS)].startswith("gpu") and j < 8 else 0
            cluster.upsert_pod(pod(f"p-{i}-{j}", f"ns-{k}", name, gpus, None))
    for k in range(args.queues):
        for j in range(5):
            pool = "gpu-missing" if j == 4 else POOLS[j % 2] if j % 2 else None
            cluster.upsert_pod(pod(f"wait-{j}", f"ns-{k}", None, 2, pool))
    settings = AutoscaleSettings()

    def median_ms(run: Callable[[], object]) -> float:
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000

    view = hints.view_of(cluster, capacities, settings)
    runs: dict[str, Callable[[], object]] = {
        "baseline": lambda: hints.view_of(cluster, capacities, settings),
        "plan": lambda: hints.plan(view, settings),
    }
    pods = args.nodes * args.pods_per_node
    print(
        f"{args.nodes} nodes, {pods} bound pods, {args.queues} queues with 5 pending pods"
        f" each: median of {args.repeats}"
    )
    for label in ("baseline", "plan") * 2:
        print(f"  {label:10} {median_ms(runs[label]):7.1f} ms")
    found = hints.plan(view, settings)
    scaling = [h for h in found.hints if h.scale]
    print(
        f"  hints: {len(found.hints)} queues, {len(scaling)} lacking room,"
        f" {len(found.deadlocks)} deadlocks, {len(found.groups)} groups"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
