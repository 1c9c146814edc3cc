"""Drain planning time on a large GPU cluster with room to consolidate, next to a baseline.

    python -m hack.bench.drain_plan [--nodes 500] [--fill-pct 60] [--candidates 20]
                                    [--repeats 5] [--seed 7]

The cluster is :func:`hack.bench.eviction_plan.build`'s (8-GPU nodes, a shared training
mix of pods, gangs and PodDisruptionBudgets), filled to ``--fill-pct`` of its GPUs; the
candidates are the ``--candidates`` nodes holding the fewest GPUs, as the patrol would
mark the emptiest. It times, ``--repeats`` times each:

* **baseline**: the view of the cluster alone (``view_of``, what every eviction cycle
  takes first) and one ``/scheduler/filter`` answer for a 1-GPU pod over every node;
* **plan**: the view and ``plan_drains`` over the candidates (what the leader does once
  per eviction cycle with ``drain.enabled``, and ``GET /debug/drains``).

The output is a table and one JSON line (medians and worst, milliseconds).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

from coordinator.config import DrainSettings, EvictionSettings
from coordinator.consolidation.drain import plan_drains
from coordinator.eviction.view import view_of
from coordinator.state.kubeobjects import pod_request
from hack.bench.eviction_plan import NOW, build, pod


def run(nodes: int, fill_pct: float, candidates: int, repeats: int, seed: int) -> dict[str, Any]:
    cluster = build(nodes, fill_pct, seed)
    state = cluster.state
    assert state is not None
    emptiest = sorted(state.names, key=lambda n: (-int(state.gpu_free[state.index[n]].sum()), n))
    chosen = emptiest[:candidates]
    drain = DrainSettings(max_draining=candidates, budgets=())
    caps = EvictionSettings(
        max_per_cycle=10_000, max_per_node_per_cycle=110, max_per_namespace_per_cycle=10_000,
        eviction_burst=10_000,
    )  # fmt: skip
    probe = pod("probe", None, 1, 4, 0, random.Random(seed))
    request = pod_request(probe, cluster.settings.signals.contiguity_threshold_b)
    names = sorted(cluster.specs)
    view_ms, filter_ms, plan_ms = [], [], []
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        view = view_of(cluster)
        view_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        cluster.filter(request, names)
        filter_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        view = view_of(cluster)
        assert view is not None
        result = plan_drains(view, chosen, drain, caps, NOW)
        plan_ms.append((time.perf_counter() - start) * 1000)
    assert result is not None
    return {
        "nodes": nodes,
        "pods": len(cluster.facts),
        "candidates": candidates,
        "freed": len(result.drains),
        "moves": sum(len(d.moves) for d in result.drains),
        "baseline_view_ms": _stats(view_ms),
        "baseline_filter_ms": _stats(filter_ms),
        "plan_ms": _stats(plan_ms),
        "ratio_plan_to_view": statistics.median(plan_ms) / statistics.median(view_ms),
    }


def _stats(ms: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(ms), 2), "max": round(max(ms), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--fill-pct", type=float, default=60.0)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    out = run(args.nodes, args.fill_pct, args.candidates, args.repeats, args.seed)
    print(
        f"{out['nodes']} nodes, {out['pods']} pods, {out['candidates']} candidates:"
        f" {out['freed']} freed, {out['moves']} pods moved"
    )
    print(f"{'':32}{'median ms':>12}{'max ms':>10}")
    for label, key in (
        ("baseline: view of the cluster", "baseline_view_ms"),
        ("baseline: filter, all nodes", "baseline_filter_ms"),
        ("view + drain plan", "plan_ms"),
    ):
        print(f"{label:32}{out[key]['median']:>12.2f}{out[key]['max']:>10.2f}")
    print(f"plan / view: {out['ratio_plan_to_view']:.2f}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
