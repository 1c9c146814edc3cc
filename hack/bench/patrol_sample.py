"""The patrol's sample on the event loop, with and without the per-queue cost, in one run.

    python -m hack.bench.patrol_sample [--nodes 2000] [--pods-per-node 10] [--repeats 15]

Builds a live cluster of ``--nodes`` 8-GPU nodes, each with a fresh report and
``--pods-per-node`` running pods in 50 namespaces (half of them in PodGroups of 7
queues, a third holding a GPU), through the coordinator's own entry points, then times
:meth:`coordinator.consolidation.patrol.Patrol.sample` — which runs on the event loop
every 30 s — ``--repeats`` times each, alternating:

* **baseline**: the nodes' utilisation windows alone (the per-queue cost switched off);
* **with cost**: the nodes' windows and every queue's CPU- and GPU-hours.

Prints the medians in milliseconds, twice each (the second pair shows the noise).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from coordinator.config import CoordinatorSettings
from coordinator.consolidation.cost import QueueCosts
from coordinator.consolidation.patrol import SAMPLE_S, Patrol
from coordinator.consolidation.windows import WINDOWS
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from hack.bench.ingest import gpu_node
from hack.loadgen.reports import build_report

NAMESPACES, QUEUES = 50, 7


class SteppedClock:
    """Time that moves only when the bench says (a sample period per sample)."""

    def __init__(self) -> None:
        self.now = 86400.0

    def wall(self) -> float:
        return 1.8e9 + self.now

    def monotonic(self) -> float:
        return self.now


class NoCost(QueueCosts):
    """The baseline: the cost's sample does nothing."""

    def sample(self, cluster: LiveCluster, now: float, span_s: float = SAMPLE_S) -> None:
        return None


def pod(node: str, i: int, j: int, per_node: int) -> dict[str, Any]:
    k = (i * per_node + j) % NAMESPACES
    meta: dict[str, Any] = {"name": f"p-{i}-{j}", "namespace": f"ns-{k}", "uid": f"u-{i}-{j}"}
    if j % 2:
        meta["annotations"] = {"scheduling.k8s.io/group-name": "pg"}
    gpus = "1" if j % 3 == 0 else "0"
    resources = {
        "requests": {"cpu": "2", "nvidia.com/gpu": gpus},
        "limits": {"nvidia.com/gpu": gpus},
    }
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": "Running"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    clock = SteppedClock()
    settings = CoordinatorSettings()
    cluster = LiveCluster(settings, clock, CoordinatorMetrics())
    names = [f"gpu-node-{i:05d}" for i in range(args.nodes)]
    cluster.replace_nodes([gpu_node(n) for n in names])
    cluster.podgroups.replace(
        [
            {
                "metadata": {"namespace": f"ns-{k}", "name": "pg"},
                "spec": {"queue": f"q-{k % QUEUES}"},
            }
            for k in range(NAMESPACES)
        ]
    )
    for i, name in enumerate(names):
        cluster.apply_report(build_report(name), clock.monotonic())
        for j in range(args.pods_per_node):
            cluster.upsert_pod(pod(name, i, j, args.pods_per_node))
    patrol = Patrol(cluster, settings.patrol, clock)
    costs, none = QueueCosts(), NoCost()

    def median_ms(with_cost: bool) -> float:
        patrol.costs = costs if with_cost else none
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            patrol.sample()
            times.append(time.perf_counter() - start)
            clock.now += SAMPLE_S
        return statistics.median(times) * 1000

    pods = args.nodes * args.pods_per_node
    print(f"{args.nodes} nodes, {pods} bound pods: Patrol.sample, median of {args.repeats}")
    for label, with_cost in (("baseline", False), ("with cost", True)) * 2:
        print(f"  {label:10} {median_ms(with_cost):6.1f} ms")
    print(f"  queues costed: {len(costs.over(WINDOWS[0], clock.monotonic()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
