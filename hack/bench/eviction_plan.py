"""Eviction planning time on a large, nearly full GPU cluster, next to a baseline.

    python -m hack.bench.eviction_plan [--nodes 500] [--fill-pct 95] [--repeats 30] [--seed 7]

Builds a live cluster of ``--nodes`` 8-GPU nodes (64 CPUs, 512 GiB) through the same
watch entry points the coordinator uses, filled with running pods of 1, 2, 4 and 8 GPUs
until ``--fill-pct`` of all GPUs are taken (so no node has 8 free), with the mix a
shared training cluster has: most pods low priority, some medium and high, half with a
recent checkpoint, some in gangs, some under PodDisruptionBudgets, a CPU pod or two per
node. Then it times, ``--repeats`` times each:

* **baseline**: one ``/scheduler/filter`` answer for a pending 8-GPU pod over every node
  (what kube-scheduler asks for every pod, and what finds that it fits nowhere);
* **plan**: the view of the cluster and ``plan_preemption`` for the same pod (what the
  leader does for each pending pod the filter refused everywhere).

The output is a table and one JSON line (medians and worst, milliseconds; the ratio of
the medians holds on a noisy machine where absolute times do not).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

from common.clock import SystemClock
from coordinator.config import CoordinatorSettings
from coordinator.eviction.answers import Plan
from coordinator.eviction.plan import plan_preemption
from coordinator.eviction.view import view_of
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.state.kubeobjects import pod_request
from coordinator.state.podfacts import pod_facts

GPUS_PER_NODE = 8
NOW = 1_790_000_000.0
PRIORITIES = (0, 0, 0, 0, 0, 0, 1_000, 1_000, 10_000)
"""Mostly low, some medium, a few high."""


def node(name: str) -> dict[str, Any]:
    allocatable = {
        "cpu": "64",
        "memory": "512Gi",
        "pods": "110",
        "nvidia.com/gpu": str(GPUS_PER_NODE),
    }
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-A100"}},
        "status": {"allocatable": allocatable},
    }


def pod(
    name: str, where: str | None, gpus: int, cpu: int, priority: int, rng: random.Random
) -> dict[str, Any]:
    notes: dict[str, str] = {}
    labels: dict[str, str] = {"app": f"app-{rng.randrange(40)}"}
    if rng.random() < 0.5:
        notes["stowage.io/last-checkpoint"] = str(NOW - rng.uniform(0, 7_200))
    if rng.random() < 0.1:
        notes["scheduling.k8s.io/group-name"] = f"job-{rng.randrange(60)}"
    resources: dict[str, Any] = {"requests": {"cpu": str(cpu), "memory": f"{4 * cpu}Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {"priority": priority, "containers": [{"resources": resources}]}
    if where:
        spec["nodeName"] = where
    return {
        "metadata": {
            "name": name,
            "namespace": f"team-{rng.randrange(8)}",
            "uid": f"uid-{name}",
            "labels": labels,
            "annotations": notes,
        },
        "spec": spec,
        "status": {"phase": "Running" if where else "Pending", "startTime": NOW - 86_400},
    }


def build(nodes: int, fill_pct: float, seed: int) -> LiveCluster:
    """The cluster, filled to ``fill_pct`` of its GPUs, no node with 8 free."""
    rng = random.Random(seed)
    cluster = LiveCluster(CoordinatorSettings(), SystemClock(), CoordinatorMetrics())
    names = [f"gpu-{k:04d}" for k in range(nodes)]
    cluster.replace_nodes([node(n) for n in names])
    target = round(nodes * GPUS_PER_NODE * fill_pct / 100)
    used = {n: 0 for n in names}
    pods = []
    total = 0
    for n in names:  # every node busy first: nothing takes the pod without evictions
        pods.append(pod(f"p-{len(pods)}", n, 1, 2, rng.choice(PRIORITIES), rng))
        used[n] += 1
        total += 1
    while total < target:
        n = rng.choice(names)
        room = GPUS_PER_NODE - used[n]
        fitting = [g for g in (1, 2, 4) if g <= room and total + g <= target]
        if not fitting:
            continue
        gpus = rng.choice(fitting)
        pods.append(pod(f"p-{len(pods)}", n, gpus, 4 * gpus, rng.choice(PRIORITIES), rng))
        used[n] += gpus
        total += gpus
    for n in names:
        pods.append(pod(f"c-{n}", n, 0, 2, rng.choice(PRIORITIES), rng))
    cluster.replace_pods(pods)
    cluster.budgets.replace(
        [
            {
                "metadata": {"name": f"pdb-{k}", "namespace": f"team-{k % 8}"},
                "spec": {"selector": {"matchLabels": {"app": f"app-{k}"}}},
                "status": {"disruptionsAllowed": k % 3},
            }
            for k in range(40)
        ]
    )
    return cluster


def run(nodes: int = 500, fill_pct: float = 95.0, repeats: int = 30, seed: int = 7) -> dict:
    cluster = build(nodes, fill_pct, seed)
    settings = cluster.settings
    rng = random.Random(seed + 1)
    pending = pod("pending-8gpu", None, GPUS_PER_NODE, 32, 2_000_000_000, rng)
    request = pod_request(pending, settings.signals.contiguity_threshold_b)
    facts = pod_facts(pending, request, settings.evictions.level_label)
    names = sorted(cluster.specs)
    filter_ms, plan_ms = [], []
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        answer = cluster.filter(request, names)
        filter_ms.append((time.perf_counter() - start) * 1000)
        assert not answer.passing, "the pending pod fits without evictions"
        start = time.perf_counter()
        view = view_of(cluster)
        assert view is not None
        result = plan_preemption(view, facts, settings.evictions, NOW)
        plan_ms.append((time.perf_counter() - start) * 1000)
    assert isinstance(result, Plan), result
    state = cluster.state
    assert state is not None
    gpus = int(state.gpu_count.sum())
    return {
        "nodes": nodes,
        "pods": len(cluster.facts),
        "gpu_allocation_pct": round(100 * (1 - int((state.gpu_free > 0).sum()) / gpus), 1),
        "baseline_filter_ms": {"median": statistics.median(filter_ms), "max": max(filter_ms)},
        "plan_ms": {"median": statistics.median(plan_ms), "max": max(plan_ms)},
        "ratio_plan_to_filter": statistics.median(plan_ms) / statistics.median(filter_ms),
        "plan": {"node": result.node, "victims": len(result.victims), "cost": result.cost},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--fill-pct", type=float, default=95.0)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    out = run(args.nodes, args.fill_pct, args.repeats, args.seed)
    print(f"{out['nodes']} nodes, {out['pods']} pods, {out['gpu_allocation_pct']} % of GPUs taken")
    print(f"{'':28}{'median ms':>12}{'max ms':>10}")
    for label, key in (("baseline: filter, all nodes", "baseline_filter_ms"), ("plan", "plan_ms")):
        print(f"{label:28}{out[key]['median']:>12.2f}{out[key]['max']:>10.2f}")
    print(f"plan / filter: {out['ratio_plan_to_filter']:.2f}; plan: {out['plan']}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
