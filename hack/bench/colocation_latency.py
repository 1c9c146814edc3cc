"""Colocation latency: LS pressure onset → BE quota applied in the kernel, two ways.

    python -m hack.bench.colocation_latency [--trials 3] [--interval 1.0]

Runs on the real kernel (root; v1 ``cpu``/``cpuacct`` and a cgroup2 tree for PSI) with
:mod:`hack.bench.colocation_rig`: a private kubepods tree, the real ``stowage coordinator
--standalone`` and ``stowage agent`` processes, a BE pod spinning on one CPU. Each trial
starts the LS pod's 50 % duty cycle on that CPU — the *onset*: it stalls from its first
wake-up — and polls the BE pod's ``cpu.cfs_quota_us`` every millisecond until a quota
appears. Then the LS load stops and the trial waits for the throttle to be released.

* *coordinator* path: no local bounds; the quota comes in a directive answering a report,
  after the coordinator saw the LS stall in one. Target: ≤ 2 report intervals.
* *local* path: the directive carries local bounds; the agent watches the LS pods'
  ``cpu.pressure`` itself and applies the local quota at once. Target: < 1 s.

Baseline printed beside them from the same run: the report interval (the round trip the
local path avoids). Prints one JSON object, then a short table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hack.bench import colocation_rig as rig

POLL_S = 0.001
HIGH_PCT = 10.0
RELAX_AFTER_S = 1.0
ONSET_TIMEOUT_S = 60.0
RELEASE_TIMEOUT_S = 60.0


def config(path: str, interval_s: float) -> dict[str, Any]:
    """Coordinator settings: the same threshold both ways; only the local path gets local
    bounds, and its coordinator waits long enough not to act first."""
    colocation: dict[str, Any] = {
        "pressure_high_pct": HIGH_PCT,
        "pressure_low_pct": HIGH_PCT / 2,
        "tighten_after_s": 0.0,
        "relax_after_s": RELAX_AFTER_S,
    }
    if path == "local":
        colocation.update(local_enabled=True, local_window_s=0.5, tighten_after_s=600.0)
    else:
        colocation.update(local_enabled=False)
    ttl = max(6 * interval_s, 3.0)
    return {
        "signals": {"report_ttl_s": ttl},
        "ingest": {"directive_ttl_s": ttl},
        "colocation": colocation,
    }


def unthrottled(be: rig.Pod) -> bool:
    return be.quota_us() == -1


def run_path(path: str, trials: int, interval_s: float) -> list[float]:
    """Onset → quota seconds for each trial of one path."""
    latencies: list[float] = []
    with rig.node(Path(tempfile.mkdtemp(prefix="stowage-bench-"))) as (tree, workers, stack):
        stack.start_coordinator(config(path, interval_s))
        be = tree.pod(stack.add_pod("batch", qos_label="BE", cpu_request="1"), "Burstable")
        ls = tree.pod(stack.add_pod("web", qos_label="LS", cpu_request="1"), "Burstable")
        cpu = rig.contended_cpu()
        workers.spawn(be, rig.BE_CODE, cpu)
        stack.start_agent(tree.root, interval_s=interval_s)
        rig.until(lambda: stack.reports_accepted() >= 3, "the agent's reports accepted")
        for _ in range(trials):
            rig.until(lambda: unthrottled(be), "released", RELEASE_TIMEOUT_S)
            onset = time.monotonic()
            workers.spawn(ls, rig.LS_CODE, cpu)
            deadline = onset + ONSET_TIMEOUT_S
            while unthrottled(be):
                if time.monotonic() > deadline:
                    raise SystemExit(f"{path}: no quota {ONSET_TIMEOUT_S:g} s after the onset")
                time.sleep(POLL_S)
            latencies.append(time.monotonic() - onset)
            workers.kill(ls)
    return latencies


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(values), 3),
        "max_s": round(max(values), 3),
        "min_s": round(min(values), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0, help="agent report interval (s)")
    args = parser.parse_args(argv)
    why = rig.unavailable()
    if why is not None:
        print(f"colocation_latency: cannot run here: {why}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"report_interval_s": args.interval, "trials": args.trials}
    for path in ("coordinator", "local"):
        runs = run_path(path, args.trials, args.interval)
        result[path] = {"onset_to_quota_s": [round(v, 3) for v in runs], **summary(runs)}
    print(json.dumps(result))
    coordinator, local = result["coordinator"], result["local"]
    print(f"report interval (baseline)   {args.interval:8.3f} s")
    print(
        f"via the coordinator          {coordinator['median_s']:8.3f} s median,"
        f" {coordinator['max_s']:.3f} s worst  (target <= {2 * args.interval:g} s)"
    )
    print(
        f"agent-local fast path        {local['median_s']:8.3f} s median,"
        f" {local['max_s']:.3f} s worst  (target < 1 s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
