"""The extender's latency while the eviction planner runs beside it, against the same
without plans, in one run.

    python -m hack.bench.eviction_beside [--nodes 500] [--pods-per-node 50] [--seconds 8]
        [--rate 200] [--rounds 2] [--pending 12]

A cluster of ``--nodes`` nodes (64 CPUs, 512 GiB, 8 A100s) each running
``--pods-per-node`` small pods of 1 CPU (the many-small-pods case where a search is
widest), and ``--pending`` pending pods of 16 CPUs, high priority, that fit nowhere
without evicting a few of them: each plan weighs every pair of pods of every node, until
its ``plan_deadline_s`` (0.5 s) or its bound on sets, and a round runs until its
``cycle_budget_s`` (5 s). The coordinator's scheduler endpoints serve on 127.0.0.1; a
client process sends ``/scheduler/filter`` for a small pending pod over every node at
``--rate`` calls per second (one connection, kept alive) and times each call end to end.

Phases alternate, ``--rounds`` times each, ``--seconds`` long:

* **baseline**: no planning;
* **plans beside**: eviction rounds back to back, as the leader's cycle runs them — in a
  forked child (:func:`coordinator.forked.run_forked`), the loop only forking and waiting;
* **plans on the loop** (for comparison, once): the same rounds run on the event loop, as
  they were before planning moved off it (one a second, so that calls get through).

Prints p50/p99/max per phase and the ratio of the p99s (plans beside / baseline), then
one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import http.client
import json
import multiprocessing
import random
import statistics
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from aiohttp import web

from common.clock import SystemClock
from coordinator.config import CoordinatorSettings, ExtenderSettings, SignalSettings
from coordinator.eviction.cycle import CHILD_GRACE_S, PLANNER_NICE
from coordinator.eviction.round import Round, plan_round
from coordinator.extender import kube
from coordinator.forked import run_forked
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import SERVICES, Services
from hack.bench import eviction_plan
from hack.bench.prioritize import NoAuth

PENDING_PRIORITY = 2_000_000_000


def build(nodes: int, per_node: int, pending: int, seed: int) -> LiveCluster:
    rng = random.Random(seed)
    settings = CoordinatorSettings(
        signals=SignalSettings(report_ttl_s=24 * 3600.0),
        extender=ExtenderSettings(max_nodes_per_request=max(nodes, 15_000)),
    )
    cluster = LiveCluster(settings, SystemClock(), CoordinatorMetrics())
    names = [f"n-{k:04d}" for k in range(nodes)]
    cluster.replace_nodes([eviction_plan.node(n) for n in names])
    pods = [
        eviction_plan.pod(f"p-{n}-{j}", n, 0, 1, rng.choice(eviction_plan.PRIORITIES), rng)
        for n in names
        for j in range(per_node)
    ]
    pods += [
        eviction_plan.pod(f"want-{k}", None, 0, 16, PENDING_PRIORITY, rng) for k in range(pending)
    ]
    cluster.replace_pods(pods)
    cluster.budgets.replace([])
    return cluster


def client(port: int, names: list[str], seconds: float, rate: float, out: Connection) -> None:
    """Filter calls at ``rate`` per second for ``seconds``; sends back the latencies (s)."""
    body = json.dumps(
        {
            "Pod": {
                "metadata": {"name": "probe", "namespace": "bench", "uid": ""},
                "spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]},
            },
            "NodeNames": names,
        }
    ).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    latencies = []
    start = time.perf_counter()
    k = 0
    while (now := time.perf_counter()) - start < seconds:
        due = start + k / rate
        if due > now:
            time.sleep(due - now)
        t0 = time.perf_counter()
        conn.request("POST", "/scheduler/filter", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"filter: {response.status}")
        latencies.append(time.perf_counter() - t0)
        k += 1
    conn.close()
    out.send(latencies)


async def measure(port: int, names: list[str], seconds: float, rate: float) -> list[float]:
    ctx = multiprocessing.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=client, args=(port, names, seconds, rate, theirs), daemon=True)
    proc.start()
    latencies: list[float] = await asyncio.to_thread(mine.recv)
    proc.join(10)
    return latencies


async def planning(
    cluster: LiveCluster, forked: bool, stop: asyncio.Event, rounds: list[Round]
) -> None:
    """Rounds back to back in a child; on the loop, one a second (back to back there, the
    loop would serve nothing at all)."""
    job = functools.partial(plan_round, cluster, {}, (), (), eviction_plan.NOW)
    budget = cluster.settings.evictions.cycle_budget_s
    while not stop.is_set():
        if forked:
            rounds.append(await run_forked(job, budget + CHILD_GRACE_S, nice=PLANNER_NICE))
        else:
            rounds.append(job())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)


def stats(latencies: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies)
    return {
        "calls": len(ms),
        "p50_ms": statistics.median(ms),
        "p99_ms": ms[min(len(ms) - 1, int(0.99 * len(ms)))],
        "max_ms": ms[-1],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    cluster = build(args.nodes, args.pods_per_node, args.pending, args.seed)
    names = sorted(cluster.specs)
    services = Services(
        settings=cluster.settings,
        clock=cluster.clock,
        metrics=cluster.metrics,
        cluster=cluster,
        authenticator=NoAuth(),
    )
    app = web.Application()
    app[SERVICES] = services
    kube.add_routes(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    phases: dict[str, list[float]] = {"baseline": [], "plans beside": [], "plans on the loop": []}
    rounds: list[Round] = []
    try:
        order = ["baseline", "plans beside"] * args.rounds + ["plans on the loop"]
        for phase in order:
            stop = asyncio.Event()
            planner = None
            if phase != "baseline":
                forked = phase == "plans beside"
                planner = asyncio.create_task(planning(cluster, forked, stop, rounds))
            phases[phase] += await measure(port, names, args.seconds, args.rate)
            stop.set()
            if planner is not None:
                await planner
    finally:
        await runner.cleanup()
    out = {name: stats(values) for name, values in phases.items()}
    plans = [o for r in rounds for o in r.outcomes]
    return {
        "nodes": args.nodes,
        "pods": len(cluster.facts),
        "rate_per_s": args.rate,
        "phases": out,
        "ratio_p99_beside_to_baseline": out["plans beside"]["p99_ms"] / out["baseline"]["p99_ms"],
        "rounds_planned": len(rounds),
        "plans_made": len(plans),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods-per-node", type=int, default=50)
    parser.add_argument("--pending", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    out = asyncio.run(run(args))
    print(f"{out['nodes']} nodes, {out['pods']} pods; filter over every node at {args.rate:g}/s")
    print(f"{'':20}{'calls':>7}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for name, s in out["phases"].items():
        print(f"{name:20}{s['calls']:>7}{s['p50_ms']:>9.2f}{s['p99_ms']:>9.2f}{s['max_ms']:>9.2f}")
    print(
        f"p99 plans beside / baseline: {out['ratio_p99_beside_to_baseline']:.2f}"
        f" ({out['rounds_planned']} rounds, {out['plans_made']} outcomes)"
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
