"""The stowage policy scores many nodes at once (placement memoised per node state, live
adjustments vectorised) exactly as the node-by-node formula does, float for float, and
explains each node with the parts that apply to it."""

from __future__ import annotations

import math
import random

import numpy as np

from coordinator.scoring.policies.stowage import Stowage
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest
from tests.coordinator.test_prioritize_speedpaths import random_cluster, random_pod

LIVE = ("pressure_points", "contiguity_points", "nvlink_points")


def reference_live(policy: Stowage, state: ClusterState, i: int, pod: PodRequest) -> dict:
    """Node by node, as the adjustments were first written."""
    args = policy.args
    out: dict[str, float] = {}
    readings = (float(state.cpu_pressure_pct[i]), float(state.memory_pressure_pct[i]))
    pressure = max((p for p in readings if not math.isnan(p)), default=-1.0)
    if pressure > args.pressure_threshold_pct:
        share = (min(pressure, 100.0) - args.pressure_threshold_pct) / (
            100.0 - args.pressure_threshold_pct
        )
        out["pressure_points"] = -args.pressure_points * share
    contiguous = int(state.contiguous_2mib_b[i])
    if pod.contiguous_b and 0 <= contiguous < pod.contiguous_b:
        out["contiguity_points"] = -args.contiguity_points
    links = state.gpu_links[i]
    if links is not None and pod.gpus >= 2:
        chosen = policy.devices(state, i, pod)
        pairs = [(a, b) for k, a in enumerate(chosen) for b in chosen[k + 1 :]]
        linked = sum(1 for a, b in pairs if links[a][b] > 0)
        if linked == len(pairs):
            out["nvlink_points"] = args.nvlink_points
        elif linked == 0:
            out["nvlink_points"] = -args.nvlink_points
    return out


def test_scores_of_many_nodes_are_the_node_by_node_scores_and_explanations_agree():
    live_seen: set[str] = set()
    for seed in range(40):
        rng = random.Random(seed)
        cluster = random_cluster(seed, "stowage", nodes=rng.randint(1, 60))
        state, policy = cluster.state, cluster._engine().policy
        assert state is not None and isinstance(policy, Stowage)
        for k in range(6):
            pod = random_pod(rng, k)
            nodes = np.flatnonzero(cluster._engine().feasible(pod))
            if not len(nodes):
                continue
            got = policy.score_nodes(state, pod, nodes)
            for score, i in zip(got.tolist(), nodes.tolist(), strict=True):
                live = reference_live(policy, state, i, pod)
                live_seen |= live.keys()
                assert score == float(policy._best(state, i, pod)[0]) + sum(live.values())
                assert score == policy.score(state, i, pod)
                explained = policy.explain(state, i, pod)
                assert {p: explained[p] for p in LIVE if p in explained} == live
                assert explained["stowage"] == score
    assert live_seen == set(LIVE)  # every adjustment was exercised
