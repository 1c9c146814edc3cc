"""Decision-by-decision replay against the FGD authors' own simulator logs (openb
``default``, seed 42; see ``reference_runs/README.md`` next to the trace).

With the logged arrival order and node ranks, our policies must place every pod where
theirs did (``FAILED`` where it failed) and reproduce the logged cumulative allocation
and fragmentation after every event. The one known exception is FGD on CPU-only pods
whose fragmentation change is exactly 0 on several nodes: the reference sums F_n in
another order, so its Δ can come out a rounding error above 0, which truncates to score
49 instead of 50, and the tie goes to another node (later CPU-only ties then differ too,
the nodes' free CPU having diverged). Those pods take no GPU, so the allocation still
matches at every event.
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

import pytest

from coordinator.scoring import registry
from coordinator.scoring.fragmentation import Fragmentation, typical_shapes
from hack.sim import arrivals, replay, trace
from tests.sim.simfiles import OPENB, REFERENCE, need

ARRIVALS = "default_seed42_arrivals.csv"
RANKS = "default_seed42_node_rank.csv"


@cache
def inputs():
    nodes = trace.load_nodes(need(OPENB / "openb_node_list_gpu_node.csv"))
    pods = trace.load_pods(need(OPENB / "openb_pod_list_default.csv"))
    sequence = arrivals.load_reference(need(REFERENCE / ARRIVALS), need(REFERENCE / RANKS), nodes)
    return nodes, pods, sequence, Fragmentation(typical_shapes(pods))


def logged(policy: str) -> list[dict[str, str]]:
    path = need(REFERENCE / f"default_seed42_placements_{policy}.csv")
    with Path(path).open(newline="") as f:
        return list(csv.DictReader(f))


def replay_against(policy: str, log: list[dict[str, str]]):
    nodes, pods, sequence, measure = inputs()
    prefix = arrivals.Arrivals(sequence.pods[: len(log)], sequence.rank)
    built = registry.build_policy(policy, None, registry.PolicyContext(pods, 42))
    events = replay.run(nodes, prefix, built, measure, keep_placements=True)
    ours = ["FAILED" if p is None else nodes[p.node].name for p in events.placements]
    return events, ours


def test_the_logged_sequence_and_ranks_load():
    nodes, _, sequence, measure = inputs()
    pods = sequence.pods
    assert len(pods) == 10_866
    assert sum(1 for p in pods if "-tuned-" in p.name) == 2714
    assert (pods[0].name, pods[0].cpu_m, pods[0].gpus) == ("openb-pod-0255", 8000, 0)
    assert (pods[1].name, pods[1].cpu_m, pods[1].gpus, pods[1].gpu_milli) == (
        "openb-pod-1685",
        3152,
        1,
        810,
    )
    assert sum(p.gpu_total_milli for p in pods) == 8_075_080  # last logged arrived value
    assert sorted(sequence.rank.tolist()) == list(range(1213))
    by_name = dict(zip((n.name for n in nodes), sequence.rank.tolist(), strict=True))
    assert (by_name["openb-node-0000"], by_name["openb-node-1212"]) == (601, 968)
    assert len(measure.shapes) == 35  # benchmark protocol §3.1: top 35 shapes cover 95.26 %


def check_metrics(events, log, ours):
    """Arrived and allocated milli exact at every event; fragmentation to 0.01 milli-GPU
    wherever the placement matches."""
    assert events.arrived.tolist() == [int(r["arrived_gpu_milli"]) for r in log]
    assert events.used.tolist() == [int(r["used_gpu_milli"]) for r in log]
    off = [
        (k, float(r["frag_milli"]), float(events.frag[k]))
        for k, r in enumerate(log)
        if ours[k] == r["node"] and abs(float(r["frag_milli"]) - events.frag[k]) > 0.01
    ]
    assert off == []


def test_best_fit_reproduces_every_placement():
    log = logged("BestFit")
    assert len(log) == 10_866
    events, ours = replay_against("best-fit", log)
    assert [k for k, r in enumerate(log) if ours[k] != r["node"]] == []
    assert ours.count("FAILED") == sum(1 for r in log if r["node"] == "FAILED") > 0
    check_metrics(events, log, ours)


def test_fgd_reproduces_all_but_float_noise_ties():
    log = logged("FGD")
    assert len(log) == 10_866
    events, ours = replay_against("fgd", log)
    differ = [k for k, r in enumerate(log) if ours[k] != r["node"]]
    assert len(differ) <= 10, differ  # 9 at the time of writing: 3975 … 4100, 8790, 8806
    _, _, sequence, _ = inputs()
    assert all(sequence.pods[k].gpus == 0 and ours[k] != "FAILED" for k in differ)
    assert events.used[-1] == int(log[-1]["used_gpu_milli"]) == 5_919_410
    check_metrics(events, log, ours)


@pytest.mark.parametrize(
    ("policy", "logged_name", "prefix"),
    [
        ("dot-product", "DotProd", 5973),
        ("gpu-packing", "GpuPacking", 5941),
        ("gpu-clustering", "GpuClustering", 6021),
    ],
)
def test_baseline_prefixes_match_placement_for_placement(policy, logged_name, prefix):
    log = logged(logged_name)
    assert len(log) == prefix
    events, ours = replay_against(policy, log)
    assert [k for k, r in enumerate(log) if ours[k] != r["node"]] == []
    check_metrics(events, log, ours)
