"""Agent cost: CPU time per collection cycle and resident memory of a running agent.

    python -m hack.bench.agent_cost [--cycles 100] [--interval 0.05]

Starts a report sink on 127.0.0.1 (it decodes every report with the real codec and
answers with directives, as a coordinator would), runs ``stowage agent`` against it as a
separate process, and measures that process with psutil: CPU time over ``--cycles``
reports after a warm-up, and RSS at the end. Two baselines are measured in the same run:

* *read floor* — the CPU time of only reading, without parsing, every kernel file the
  collectors read, once per cycle (what any agent must pay);
* *bare interpreter* — RSS of a Python process that imports nothing.

Prints one JSON object, then a short table. Targets on a 2-core machine: ≤ 10 ms CPU
per cycle without GPUs, ≤ 60 MB RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from aiohttp import web

from hack.fixtures.record import agent_files
from hack.report_sink import ReportSink

WARMUP_CYCLES = 10
REPO = Path(__file__).resolve().parents[2]


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def read_floor_ms(cycles: int) -> float:
    """CPU ms per cycle to read every file the collectors read, unparsed."""
    files = [str(src) for src, _ in agent_files(Path("/proc"), Path("/sys"))]
    start = time.process_time()
    for _ in range(cycles):
        for path in files:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            while os.read(fd, 65536):
                pass
            os.close(fd)
    return (time.process_time() - start) * 1000 / cycles


def bare_rss_mb() -> float:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        time.sleep(0.5)
        return psutil.Process(proc.pid).memory_info().rss / 2**20
    finally:
        proc.kill()
        proc.wait()


async def measure(cycles: int, interval: float, extra: list[str]) -> dict[str, float]:
    sink = ReportSink()
    runner = web.AppRunner(sink.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    cmd = [
        sys.executable,
        "-m",
        "cli.main",
        "--log-level",
        "WARNING",
        "agent",
        "--coordinator",
        f"http://127.0.0.1:{port}",
        "--node-name",
        "bench",
        "--interval",
        str(interval),
        "--jitter",
        "0",
        "--pods-source",
        "none",
        *extra,
    ]
    agent = subprocess.Popen(cmd, cwd=REPO)  # noqa: ASYNC220 - one start, outside the timing
    proc = psutil.Process(agent.pid)
    try:
        timeout = 30 + cycles * interval * 5
        await sink.wait_for(WARMUP_CYCLES, timeout)
        cpu0, t0, n0 = cpu_s(proc), time.monotonic(), sink.count
        await sink.wait_for(n0 + cycles, timeout)
        cpu1, t1, n1 = cpu_s(proc), time.monotonic(), sink.count
        rss = proc.memory_info().rss / 2**20
    finally:
        agent.terminate()
        agent.wait(10)
        await runner.cleanup()
    measured = n1 - n0
    return {
        "cycles": measured,
        "cpu_ms_per_cycle": (cpu1 - cpu0) * 1000 / measured,
        "wall_s": t1 - t0,
        "rss_mb": rss,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("agent_args", nargs="*", help="extra `stowage agent` arguments")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.cycles, args.interval, args.agent_args))
    result["read_floor_ms_per_cycle"] = read_floor_ms(args.cycles)
    result["bare_python_rss_mb"] = bare_rss_mb()
    result["cpu_vs_read_floor"] = result["cpu_ms_per_cycle"] / result["read_floor_ms_per_cycle"]
    result["cpus"] = os.cpu_count() or 0
    print(json.dumps({k: round(v, 3) for k, v in result.items()}))
    print(
        f"agent: {result['cpu_ms_per_cycle']:.2f} ms CPU/cycle over {result['cycles']:.0f} cycles"
        f" (read floor {result['read_floor_ms_per_cycle']:.2f} ms,"
        f" x{result['cpu_vs_read_floor']:.1f}); RSS {result['rss_mb']:.1f} MB"
        f" (bare python {result['bare_python_rss_mb']:.1f} MB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
