"""No behaviour changes: every policy packs every shared openb workload exactly as the
simulator did when ``golden_packing.json`` was recorded.

Each run is a truncated trace — every 20th node of each GPU model of the openb cluster (64
nodes, all seven models) and the workload's pods inflated onto it as ``stowage sim`` does —
so the whole table replays in seconds. A run is pinned by a digest of every pod's
placement (node and devices, or none) and a digest of its binned rows (every metric,
floats to the bit), with U at x = 100 and 130 beside them for a reader. A change that
moves one pod of one run, or one float of one row, fails here; one that is meant to
change packing re-records the file and says why in its commit::

    python -m tests.sim.test_sim_golden --record
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, Final

import pytest

from coordinator.scoring import registry
from coordinator.scoring.fragmentation import Fragmentation, typical_shapes
from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim import arrivals, constrain, replay, trace
from hack.sim.main import parse_entry
from tests.sim.simfiles import OPENB, need

GOLDEN: Final = Path(__file__).with_name("golden_packing.json")
NODE_STEP: Final = 20
"""Every 20th node of each model: 64 nodes, 324 GPUs, every model of the cluster."""
WORKLOADS: Final = (
    "default",
    "cpu050",
    "cpu250",
    "gpushare40",
    "gpushare100",
    "multigpu20",
    "multigpu50",
)
CONSTRAINED: Final = "default+mixed33"
"""The default workload with a third of its GPU pods limited to some models (the mixed
family of :mod:`hack.sim.constrain`): the model-constrained paths of every policy."""
ENTRIES: Final = (*registry.POLICIES, "stowage:reserve_gpu_cpu=true", "fgd+reserve-gpu-cpu")
SEEDS: Final = {"default": (42, 43)}
"""Two seeds for the default workload, one (42) for the others."""


@cache
def cluster() -> list[NodeSpec]:
    """Every 20th node of each GPU model, in the list's order."""
    seen: Counter[str] = Counter()
    out = []
    for node in trace.load_nodes(need(OPENB / trace.OPENB_GPU_NODES)):
        if seen[node.gpu_model] % NODE_STEP == 0:
            out.append(node)
        seen[node.gpu_model] += 1
    return out


@cache
def workload(name: str) -> list[PodRequest]:
    if name == CONSTRAINED:
        pods = workload("default")
        specs = constrain.choose_specs(pods, cluster(), 0.33, 7, family="mixed")
        return [
            dataclasses.replace(p, gpu_models=frozenset(specs[i].split("|"))) if i in specs else p
            for i, p in enumerate(pods)
        ]
    return trace.load_pods(need(OPENB / f"openb_pod_list_{name}.csv"))


def runs() -> Iterator[tuple[str, str, int]]:
    for name in (*WORKLOADS, CONSTRAINED):
        for entry in ENTRIES:
            for seed in SEEDS.get(name, (42,)):
                yield name, entry, seed


def key(name: str, entry: str, seed: int) -> str:
    return f"{name} | {entry} | {seed}"


def replayed(name: str, entry: str, seed: int) -> dict[str, Any]:
    """What the golden file pins of one run."""
    nodes, pods = cluster(), workload(name)
    sequence = arrivals.build(pods, nodes, seed)
    policy = parse_entry(entry).build(registry.PolicyContext(pods, seed))
    events = replay.run(
        nodes, sequence, policy, Fragmentation(typical_shapes(pods)), keep_placements=True
    )
    placements = [None if p is None else [p.node, list(p.devices)] for p in events.placements]
    rows = replay.binned(events, sum(n.gpus for n in nodes) * 1000)
    at = {row["x"]: row["unalloc_pct"] for row in rows}
    return {
        "pods": len(placements),
        "placed": sum(p is not None for p in placements),
        "placements_sha256": _digest(placements),
        "rows_sha256": _digest(rows),
        "unalloc_pct_at_100": at.get(100),
        "unalloc_pct_at_130": at.get(130),
    }


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


@cache
def golden() -> dict[str, Any]:
    recorded: dict[str, Any] = json.loads(GOLDEN.read_text())["runs"]
    return recorded


def test_the_golden_file_covers_every_run():
    assert sorted(golden()) == sorted(key(*run) for run in runs())
    assert len(golden()) == (len(WORKLOADS) + 1 + 1) * len(ENTRIES)  # default has two seeds


@pytest.mark.parametrize("name", [*WORKLOADS, CONSTRAINED])
def test_every_policy_packs_the_workload_as_recorded(name):
    for run in runs():
        if run[0] == name:
            assert replayed(*run) == golden()[key(*run)], key(*run)


def record() -> None:
    table = {key(*run): replayed(*run) for run in runs()}
    note = (
        "Recorded by python -m tests.sim.test_sim_golden --record; "
        "see the module's docstring for what each run is."
    )
    GOLDEN.write_text(json.dumps({"note": note, "runs": table}, indent=1, sort_keys=True) + "\n")
    print(f"{GOLDEN}: {len(table)} runs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="record the golden packing results")
    parser.add_argument("--record", action="store_true", required=True)
    parser.parse_args()
    record()
    sys.exit(0)
