"""Scheduling speed of every policy on the openb cluster (1,213 nodes, 6,212 GPUs).

    python -m hack.bench.engine_speed [--trace DIR] [--seed 42] [--policies fgd,best-fit]

Replays the whole inflated ``default`` workload (10,866 arrivals, metrics after every
event included) per policy and prints pods scheduled per CPU-second of one core. The
baseline in the same run is the same engine with its per-shape score cache turned off —
every feasible node scored for every pod, as a plain port does — over the first
``--baseline-pods`` arrivals.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from coordinator.scoring import registry
from coordinator.scoring.engine import Engine
from coordinator.scoring.fragmentation import Fragmentation, typical_shapes
from coordinator.state.cluster import ClusterState
from hack.sim import arrivals, replay, trace

DEFAULT_TRACE = trace.OPENB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--policies", default=",".join(registry.POLICIES))
    parser.add_argument("--baseline-pods", type=int, default=300)
    args = parser.parse_args(argv)
    nodes = trace.load_nodes(args.trace / "openb_node_list_gpu_node.csv")
    pods = trace.load_pods(args.trace / "openb_pod_list_default.csv")
    sequence = arrivals.build(pods, nodes, args.seed)
    measure = Fragmentation(typical_shapes(pods))
    context = registry.PolicyContext(pods, args.seed)
    results = {}
    for name in args.policies.split(","):
        events = replay.run(nodes, sequence, registry.build_policy(name, None, context), measure)
        results[name] = len(sequence.pods) / events.seconds
        print(f"{name:>16}: {results[name]:8,.0f} pods/s  (full run, {len(sequence.pods)} pods)")
    state = ClusterState(nodes)
    engine = Engine(
        state, registry.build_policy("fgd", None, context), sequence.rank, cache_scores=False
    )
    started = time.process_time()
    for pod in sequence.pods[: args.baseline_pods]:
        engine.place(pod)
    baseline = args.baseline_pods / (time.process_time() - started)
    print(f"{'fgd, no cache':>16}: {baseline:8,.0f} pods/s  (first {args.baseline_pods} pods)")
    if "fgd" in results:
        print(f"fgd with the cache is {results['fgd'] / baseline:.1f}x the uncached engine")
    print(json.dumps({"pods_per_s": results, "fgd_uncached_pods_per_s": baseline}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
