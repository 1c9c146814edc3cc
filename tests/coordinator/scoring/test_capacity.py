"""One definition of node capacity: the live filter refuses a node on a capacity count
exactly when the engine finds it infeasible, on random clusters and pods."""

from __future__ import annotations

import random

import numpy as np

from coordinator.scoring import capacity, livefilters
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


def test_devices_with_room_counts_as_a_plain_sum_at_every_width():
    """Counted eight devices to a word: widths below, at and past a word (and past two)."""
    rng = np.random.default_rng(3)
    for width in (1, 2, 7, 8, 9, 16, 17, 24):
        free = rng.integers(-1, 1001, size=(50, width))
        free[:, rng.integers(0, width) :] = -1  # padded devices, as nodes with fewer GPUs
        for milli in (1, 250, 500, 1000):
            want = [sum(1 for g in row if g >= milli) for row in free.tolist()]
            assert capacity.devices_with_room(free, milli).tolist() == want, (width, milli)


def test_room_counts_alike_over_few_nodes_and_over_most():
    """A few rows are counted on their copy, many on the whole state: the same counts."""
    for seed in range(20):
        rng = random.Random(seed)
        cluster = random_cluster(seed, "most-allocated", nodes=40)
        state = cluster.state
        assert state is not None
        for k in range(4):
            pod = random_pod(rng, k)
            if not pod.gpus:
                continue
            for count in (1, 3, 9, 10, 40, 80):  # below and above a quarter of 40 nodes
                nodes = np.array([rng.randrange(len(state)) for _ in range(count)])
                got = capacity.room(state, pod, nodes).gpus_with_room
                assert got is not None
                want = [
                    sum(1 for g in state.gpu_free[i].tolist() if g >= pod.gpu_milli)
                    for i in nodes.tolist()
                ]
                assert got.tolist() == want
