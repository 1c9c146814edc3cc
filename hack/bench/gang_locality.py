"""What the gang locality term costs a prioritize call, next to the policy's own scoring in
the same run.

    python -m hack.bench.gang_locality [--nodes 1000,5000,15000] [--policy stowage]

Per cluster size: 8-GPU nodes in racks of 8 (every fourth GPU taken, so nodes differ), a
one-GPU gang member. Timed, best of ``--repeat`` (milliseconds, one core):

* **policy, cold**: the engine's scores of every node for the member's shape with nothing
  cached (the first call of a shape); **policy, warm**: the same call again (the cache
  answers, what most calls see);
* **term**: :func:`coordinator.scoring.ganglocality.locality` over every node, for a gang of
  8 with 4 landed, and for a gang of the largest size a PodGroup allows (2^31-1) with the
  most members a call counts (10,000) landed: the bound the work holds to.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np

from coordinator.scoring import ganglocality, registry
from coordinator.scoring.engine import Engine
from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from coordinator.state.kubeobjects import MAX_GANG_SIZE
from coordinator.state.podrequest import PodRequest

GIB = 1 << 30
RACK = "example.com/rack"


def best_ms(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return 1000 * min(times)


def measure(n: int, policy_name: str, repeat: int) -> dict[str, float]:
    state = ClusterState([NodeSpec(f"n{i:05}", 64_000, 512 * GIB, 8, "A100") for i in range(n)])
    for i in range(0, n, 4):
        state.allocate(Placement(i, (i % 8,)), 1000, GIB, 1000, "1-gpu")
    domains = ganglocality.domains_of([{RACK: f"r{i // 8}"} for i in range(n)], [RACK])
    pod = PodRequest("ns/w", 8000, 64 * GIB, 1, 1000, gang="ns/g")
    engine = Engine(state, registry.build_policy(policy_name))
    feasible = engine.feasible(pod)

    def cold() -> object:
        fresh = Engine(state, registry.build_policy(policy_name))
        return fresh.scores(pod, feasible)

    engine.scores(pod, feasible)
    small = ganglocality.Gang("ns/g", 8, np.arange(4, dtype=np.int64))
    most = ganglocality.MAX_MEMBERS_COUNTED
    largest = ganglocality.Gang("ns/g", MAX_GANG_SIZE, np.arange(most, dtype=np.int64) % n)
    return {
        "nodes": n,
        "policy_cold_ms": round(best_ms(cold, repeat), 2),
        "policy_warm_ms": round(best_ms(lambda: engine.scores(pod, feasible), repeat), 2),
        "term_gang_of_8_ms": round(
            best_ms(lambda: ganglocality.locality(state, pod, small, domains), repeat), 2
        ),
        "term_largest_gang_ms": round(
            best_ms(lambda: ganglocality.locality(state, pod, largest, domains), repeat), 2
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1000,5000,15000")
    parser.add_argument("--policy", default="stowage")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    for n in (int(x) for x in args.nodes.split(",")):
        print(json.dumps(measure(n, args.policy, args.repeat)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
