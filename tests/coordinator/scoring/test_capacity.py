"""One definition of node capacity: the live filter refuses a node on a capacity count
exactly when the engine finds it infeasible, on random clusters and pods."""

from __future__ import annotations

import random

import numpy as np

from coordinator.scoring import livefilters
from tests.coordinator.test_prioritize_speedpaths import random_cluster, random_pod, reason_kind

CAPACITY = {"model", "count", "room", "cpu", "memory"}


def test_capacity_refusals_are_exactly_the_engines_infeasible_nodes():
    refused_seen = 0
    for seed in range(40):
        rng = random.Random(seed)
        cluster = random_cluster(seed, "most-allocated")
        state = cluster.state
        assert state is not None and cluster.engine is not None
        everyone = np.arange(len(state))
        for k in range(5):
            pod = random_pod(rng, k)
            feasible = cluster.engine.feasible(pod)
            found = livefilters.rejections(state, pod, everyone, cluster.settings.signals)
            on_capacity = {i for i, r in found.items() if reason_kind(r.reason) in CAPACITY}
            assert on_capacity == set(np.flatnonzero(~feasible).tolist())
            refused_seen += len(on_capacity)
    assert refused_seen  # the comparison covered refusals, not only passes
