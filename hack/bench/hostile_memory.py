"""Coordinator memory under hostile scheduler load, next to a baseline of ordinary load.

    python -m hack.bench.hostile_memory [--nodes 500] [--requests 2000] [--phantoms 100]
                                        [--seed 7]

A server process serves the real coordinator app over a cluster of ``--nodes`` Nodes
(built as :mod:`hack.bench.prioritize` builds it, policy ``stowage``) on 127.0.0.1. This
process then sends, one after another:

1. **baseline**: ``--requests`` ordinary kube-scheduler rounds, a ``filter`` and a
   ``prioritize`` in NodeNames mode with every node's name, each round for a pod with a
   new UID (so each is assumed on the node ranked first, as in production);
2. **hostile**: ``--requests`` rounds in full Nodes mode, each offering ``--phantoms``
   Node objects never seen before (8 GPUs, 224 CPUs, 2 TiB each: the most attractive
   nodes there are) and a pod with a new UID, the shape that once made the coordinator
   store every phantom node and assume pods on them without bound.

After each phase it reads the server's resident memory (``VmRSS`` in
``/proc/<pid>/status``, and the peak, ``VmHWM``) and what the cluster holds (nodes,
assumed pods). The output is a table and one JSON line. Bounded means: the hostile phase
grows memory no more than the baseline phase does (plus noise), the node count stays
the watch's, and assumed pods stay within ``kube.max_assumed``.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import sys
import uuid
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from coordinator import eventloop
from coordinator.app import make_app
from coordinator.services import SERVICES
from hack.bench import prioritize as bench

STATE_PATH: Final = "/bench/state"
PHANTOM: Final = bench.NodeKind("phantom", 0.0, 224, 2048, 8, bench.NODE_KINDS[0].model)


def serve(nodes: int, seed: int, ready: Connection) -> None:
    """Server process: the coordinator app, plus a route telling what the cluster holds."""
    services = bench.build_services(nodes, 0, "stowage", seed)

    async def state(request: web.Request) -> web.Response:
        cluster = request.app[SERVICES].cluster
        holds = {"nodes": len(cluster.specs), "assumed": cluster.holdings.assumed_count}
        return web.json_response(holds)

    app = make_app(services)
    app.router.add_get(STATE_PATH, state)

    async def run() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ready.send(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        await asyncio.Event().wait()

    eventloop.run(run())


def memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of process ``pid``, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def phantom(name: str) -> dict[str, Any]:
    """A Node no watch has seen, as large as nodes come."""
    return bench.node_json(name, PHANTOM)


def pod(uid: str) -> dict[str, Any]:
    return bench.pod_json(bench.POD_SHAPES[0], f"p-{uid[:8]}", uid)


class Client:
    """Posts to the server over one keep-alive connection and reads what it holds."""

    def __init__(self, port: int, pid: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.pid = pid
        self.statuses: dict[int, int] = {}

    def post(self, path: str, body: dict[str, Any]) -> None:
        """POST ``body``, counting the answer's status (a hostile call may be refused)."""
        data = json.dumps(body).encode()
        self.conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        response = self.conn.getresponse()
        response.read()
        self.statuses[response.status] = self.statuses.get(response.status, 0) + 1

    def sample(self) -> dict[str, Any]:
        self.conn.request("GET", STATE_PATH)
        holds = json.loads(self.conn.getresponse().read())
        memory = memory_kib(self.pid)
        return {
            "rss_mib": round(memory["VmRSS"] / 1024, 1),
            "peak_rss_mib": round(memory["VmHWM"] / 1024, 1),
            **holds,
        }


def run(args: argparse.Namespace) -> dict[str, Any]:
    names = [name for name, _ in bench.node_kinds(args.nodes, args.seed)]
    receive, send = multiprocessing.Pipe(duplex=False)
    server = multiprocessing.get_context("spawn").Process(
        target=serve, args=(args.nodes, args.seed, send), daemon=True
    )
    server.start()
    try:
        port = receive.recv()
        assert server.pid is not None
        client = Client(port, server.pid)
        samples = {"start": client.sample()}
        for _ in range(args.requests):
            body = {"Pod": pod(str(uuid.uuid4())), "NodeNames": names}
            client.post("/scheduler/filter", body)
            client.post("/scheduler/prioritize", body)
        samples["after_baseline"] = client.sample()
        baseline_statuses, client.statuses = client.statuses, {}
        for i in range(args.requests):
            items = [phantom(f"phantom-{i:06d}-{j:04d}") for j in range(args.phantoms)]
            body = {"Pod": pod(str(uuid.uuid4())), "Nodes": {"items": items}}
            client.post("/scheduler/filter", body)
            client.post("/scheduler/prioritize", body)
        samples["after_hostile"] = client.sample()
        client.conn.close()
    finally:
        server.terminate()
        server.join(30)
    base = samples["after_baseline"]["rss_mib"] - samples["start"]["rss_mib"]
    hostile = samples["after_hostile"]["rss_mib"] - samples["after_baseline"]["rss_mib"]
    return {
        "nodes": args.nodes,
        "requests_per_phase": args.requests,
        "phantoms_per_request": args.phantoms,
        "phantom_nodes_offered": args.requests * args.phantoms,
        "samples": samples,
        "baseline_growth_mib": round(base, 1),
        "hostile_growth_mib": round(hostile, 1),
        "statuses": {
            "baseline": {str(k): v for k, v in sorted(baseline_statuses.items())},
            "hostile": {str(k): v for k, v in sorted(client.statuses.items())},
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--requests", type=int, default=2000, help="rounds per phase")
    parser.add_argument("--phantoms", type=int, default=100, help="new Nodes per hostile call")
    parser.add_argument("--seed", type=int, default=7)
    result = run(parser.parse_args(argv))
    print(f"{'phase':<16}{'RSS MiB':>10}{'peak MiB':>10}{'nodes':>8}{'assumed':>9}")
    for phase, sample in result["samples"].items():
        print(
            f"{phase:<16}{sample['rss_mib']:>10}{sample['peak_rss_mib']:>10}"
            f"{sample['nodes']:>8}{sample['assumed']:>9}"
        )
    print(json.dumps({"cpus": os.cpu_count(), "python": sys.version.split()[0], **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
