"""Colocation latency: LS pressure onset → BE quota applied in the kernel, two ways.

    python -m hack.bench.colocation_latency [--trials 3] [--interval 1.0]

Runs on the real kernel (root; v1 ``cpu``/``cpuacct`` and a cgroup2 tree for PSI) with
:mod:`hack.bench.colocation_rig`: a private kubepods tree, the real ``stowage coordinator
--standalone`` and ``stowage agent`` processes, a BE pod spinning on one CPU. Each trial
starts the LS pod's 50 % duty cycle on that CPU — the *onset*: it stalls from its first
wake-up — and polls the BE pod's ``cpu.cfs_quota_us`` every millisecond until a quota
appears; trials start at a random phase of the report cycle. Then the LS load stops and
the trial waits for the throttle to be released.

The coordinator reads the LS pods' ``some avg10``, which the kernel first updates 2 s
after a cgroup's stall begins (PSI averages every 2 s): that is the floor of this path,
whatever the interval.

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
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hack.bench import colocation_rig as rig
from hack.waiting import until

POLL_S = 0.001
HIGH_PCT = 5.0
"""LS stall (%) that tightens: some avg10 for the coordinator, over the window locally."""
LOW_PCT = 4.0
FLOOR_M = 200
RELAX_AFTER_S = 0.5
LOCAL_WINDOW_S = 0.5
LOCAL_HOLD_S = 2.0
TARGETS = {"coordinator": "<= {:g} s: two report intervals", "local": "< 1 s"}
LABELS = {"coordinator": "via the coordinator", "local": "agent-local fast path"}
ONSET_TIMEOUT_S = 60.0
RELEASE_TIMEOUT_S = 60.0


def config(path: str, interval_s: float) -> dict[str, Any]:
    """Coordinator settings: the same threshold both ways, a tightening straight to the
    floor and a release in one step once the stall is gone. Only the local path gets local
    bounds, and its coordinator waits long enough not to act first."""
    pool: dict[str, Any] = {
        "pressure_high_pct": HIGH_PCT,
        "pressure_low_pct": LOW_PCT,
        "tighten_after_s": 0.1,
        "tighten_factor": 0.1,
        "floor_pct": 1.0,
        "floor_min_m": FLOOR_M,
        "relax_after_s": RELAX_AFTER_S,
        "relax_step_pct": 100.0,
        "local": path == "local",
        "local_window_s": LOCAL_WINDOW_S,
        "local_hold_s": LOCAL_HOLD_S,
    }
    if path == "local":
        pool["tighten_after_s"] = 600.0
    ttl = max(6 * interval_s, 3.0)
    return {
        "signals": {"report_ttl_s": ttl},
        "ingest": {"directive_ttl_s": ttl},
        "colocation": {"default": pool},
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
        until(lambda: stack.reports_accepted() >= 3, "the agent's reports accepted")
        for _ in range(trials):
            until(lambda: unthrottled(be), "released", RELEASE_TIMEOUT_S)
            # A release arrives with a report's answer: start at a random phase of the
            # report cycle, not in step with it.
            time.sleep(random.uniform(0, interval_s))
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
    parser.add_argument(
        "--paths", default="coordinator,local", help="comma list: coordinator, local"
    )
    args = parser.parse_args(argv)
    why = rig.unavailable()
    if why is not None:
        print(f"colocation_latency: cannot run here: {why}", file=sys.stderr)
        return 2
    paths = [p for p in args.paths.split(",") if p]
    if not set(paths) <= set(TARGETS):
        parser.error(f"--paths: expected a comma list of {', '.join(TARGETS)}")
    result: dict[str, Any] = {"report_interval_s": args.interval, "trials": args.trials}
    for path in paths:
        runs = run_path(path, args.trials, args.interval)
        result[path] = {"onset_to_quota_s": [round(v, 3) for v in runs], **summary(runs)}
    print(json.dumps(result))
    print(f"{'report interval (baseline)':30} {args.interval:7.3f} s")
    for path in paths:
        target = TARGETS[path].format(2 * args.interval)
        print(
            f"{LABELS[path]:30} {result[path]['median_s']:7.3f} s median,"
            f" {result[path]['max_s']:.3f} s worst  (target {target})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
