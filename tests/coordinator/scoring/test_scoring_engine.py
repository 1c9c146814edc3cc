"""The engine: filter, tie-breaking by rank, the per-shape score cache and its invalidation."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pytest

from coordinator.scoring import engine as engine_module
from coordinator.scoring.base import Policy
from coordinator.scoring.engine import Engine
from coordinator.scoring.policies.best_fit import BestFit
from coordinator.scoring.registry import PolicyContext, build_policy
from coordinator.state.cluster import ClusterState, Placement
from coordinator.state.podrequest import PodRequest
from coordinator.state.signals import UNKNOWN, NodeSignals
from tests.coordinator.scoring.builders import GIB, cluster, occupy, pod


class Scripted(Policy):
    """Scores from a table the test controls; counts every call to ``score``."""

    name = "scripted"

    def __init__(self, table: dict[int, float], cacheable: bool = True) -> None:
        self.table = table
        self.cacheable = cacheable
        self.calls: list[int] = []

    def shape_key(self, p: PodRequest) -> Hashable | None:
        return (p.cpu_m, p.gpus, p.gpu_milli) if self.cacheable else None

    def score(self, state: ClusterState, i: int, p: PodRequest) -> float:
        self.calls.append(i)
        return self.table[i]


def four_nodes() -> ClusterState:
    return cluster((8000, 8 * GIB, 2), (8000, 8 * GIB, 2), (8000, 8 * GIB, 2), (8000, 8 * GIB, 2))


# ----------------------------------------------------------------- filter


def test_feasible_checks_cpu_memory_gpu_count_room_and_model():
    state = cluster(
        (4000, 4 * GIB, 2, "A100"),
        (1000, 4 * GIB, 2, "A100"),  # too little CPU
        (4000, 1 * GIB, 2, "A100"),  # too little memory
        (4000, 4 * GIB, 1, "A100"),  # one GPU only
        (4000, 4 * GIB, 2, "T4"),  # wrong model
        (4000, 4 * GIB, 2, "A100"),  # second GPU too full
        (4000, 4 * GIB),  # no GPU
    )
    occupy(state, 5, gpu_used=(0, 600))
    engine = Engine(state, BestFit())
    two = pod(2000, 2 * GIB, gpus=2, milli=500, models={"A100", "V100"})
    assert engine.feasible(two).tolist() == [True, False, False, False, False, False, False]
    any_model = pod(2000, 2 * GIB, gpus=2, milli=400)
    assert engine.feasible(any_model).tolist() == [True, False, False, False, True, True, False]
    cpu_only = pod(2000, 2 * GIB)
    assert engine.feasible(cpu_only).tolist() == [True, False, False, True, True, True, True]


def test_feasible_uses_the_memory_the_agent_found_really_allocatable():
    state = cluster((8000, 64 * GIB), (8000, 64 * GIB))
    occupy(state, 0, mem=10 * GIB)
    occupy(state, 1, mem=10 * GIB)
    # node 0's agent sees only 60 GiB usable: 4 GiB short of nominal → 50 GiB free
    state.set_signals(0, NodeSignals(measured_at=1.0, true_allocatable_mem_b=60 * GIB))
    engine = Engine(state, BestFit())
    assert engine.feasible(pod(100, 50 * GIB)).tolist() == [True, True]
    assert engine.feasible(pod(100, 51 * GIB)).tolist() == [False, True]
    # more really allocatable than nominal gives nothing extra
    state.set_signals(1, NodeSignals(measured_at=1.0, true_allocatable_mem_b=80 * GIB))
    assert engine.feasible(pod(100, 55 * GIB)).tolist() == [False, False]
    state.set_signals(0, UNKNOWN)
    assert engine.feasible(pod(100, 54 * GIB)).tolist() == [True, True]


def test_nothing_fits_gives_none_and_leaves_the_state_alone():
    state = cluster((4000, 4 * GIB, 1))
    engine = Engine(state, BestFit())
    assert engine.place(pod(1000, GIB, gpus=2)) is None
    assert state.version.tolist() == [0]
    assert state.gpu_tuple(0) == (1000,)


# ------------------------------------------------------------------ ties


def test_ties_go_to_the_smallest_rank():
    state = four_nodes()
    policy = Scripted({0: 5.0, 1: 7.0, 2: 7.0, 3: 7.0})
    assert Engine(state, policy).choose(pod(1000)) == Placement(1, ())
    assert Engine(state, policy, np.array([0, 3, 1, 2])).choose(pod(1000)) == Placement(2, ())
    assert Engine(state, policy, np.array([0, 3, 2, 1])).choose(pod(1000)) == Placement(3, ())
    # node 0 has the smallest rank but a lower score
    assert Engine(state, policy, np.array([0, 1, 2, 3])).choose(pod(1000)).node == 1


def test_an_infeasible_node_never_wins_a_tie():
    state = four_nodes()
    occupy(state, 2, cpu=8000)
    policy = Scripted({0: 1.0, 1: 1.0, 2: 9.0, 3: 1.0})
    assert Engine(state, policy, np.array([3, 2, 0, 1])).choose(pod(1000)).node == 3


def test_a_real_policy_breaks_ties_by_rank():
    state = cluster((8000, 8 * GIB, 2), (8000, 8 * GIB, 2), (8000, 8 * GIB, 2))
    engine = Engine(state, BestFit(), np.array([2, 0, 1]))
    assert engine.place(pod(1000, gpus=1)) == Placement(1, (0,))


@pytest.mark.parametrize(
    "rank", [[0, 0, 1, 2], [0, 1, 2], [1, 2, 3, 4], [0, 1, 2, 3, 4], [[0, 1], [2, 3]]]
)
def test_rank_must_be_a_permutation(rank):
    with pytest.raises(ValueError, match="permutation"):
        Engine(four_nodes(), Scripted({}), np.array(rank))


def test_nan_score_is_an_error_not_a_choice():
    state = four_nodes()
    with pytest.raises(ValueError, match="NaN"):
        Engine(state, Scripted({0: 1.0, 1: float("nan"), 2: 0.0, 3: 0.0})).choose(pod(10))


# ----------------------------------------------------------------- cache


def test_scores_are_cached_per_shape_and_only_changed_nodes_are_rescored():
    state = four_nodes()
    policy = Scripted({0: 1.0, 1: 2.0, 2: 3.0, 3: 0.0})
    engine = Engine(state, policy)
    small = pod(1000, GIB)
    assert engine.place(small) == Placement(2, ())
    assert sorted(policy.calls) == [0, 1, 2, 3]
    policy.calls.clear()
    engine.choose(pod(1000, 2 * GIB))  # same shape key (memory is not part of it)
    assert policy.calls == [2]  # only the node the placement changed
    policy.calls.clear()
    engine.choose(pod(2000, GIB))  # another shape: every feasible node
    assert sorted(policy.calls) == [0, 1, 2, 3]


def test_a_node_changed_outside_the_engine_is_rescored():
    state = four_nodes()
    policy = Scripted({0: 1.0, 1: 2.0, 2: 3.0, 3: 0.0})
    engine = Engine(state, policy)
    engine.choose(pod(1000))
    policy.calls.clear()
    occupy(state, 3, cpu=10)
    state.release(Placement(3, ()), 10, 0, 0, None)
    engine.choose(pod(1000))
    assert policy.calls == [3]


def test_uncacheable_policy_is_scored_every_time():
    state = four_nodes()
    policy = Scripted({0: 1.0, 1: 2.0, 2: 3.0, 3: 0.0}, cacheable=False)
    engine = Engine(state, policy)
    engine.choose(pod(1000))
    engine.choose(pod(1000))
    assert sorted(policy.calls) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_bumping_epoch_drops_cached_scores():
    state = four_nodes()
    policy = Scripted({0: 1.0, 1: 2.0, 2: 3.0, 3: 0.0})
    engine = Engine(state, policy)
    p = pod(1000)
    assert engine.choose(p).node == 2
    policy.table = {0: 1.0, 1: 2.0, 2: 3.0, 3: 9.0}
    # the policy said nothing: the cache still answers (proves the cache is in use)
    assert engine.choose(p).node == 2
    policy.epoch += 1
    assert engine.choose(p).node == 3
    assert engine.scores(p, engine.feasible(p)).tolist() == [1.0, 2.0, 3.0, 9.0]


def test_many_shapes_grow_the_cache_without_mixing_them_up():
    state = cluster((200_000, 8 * GIB), (200_000, 8 * GIB))
    policy = BestFit()
    engine = Engine(state, policy)
    # 150 shapes, more than the initial cache width; best-fit's score depends on cpu_m
    shapes = [pod(100 * k) for k in range(150)]
    for p in shapes:
        engine.scores(p, engine.feasible(p))
    for p in shapes:
        expected = [policy.score(state, i, p) for i in range(2)]
        assert engine.scores(p, engine.feasible(p)).tolist() == expected


def test_the_cache_keeps_the_most_recently_used_shapes_and_no_more():
    state = four_nodes()
    policy = Scripted({0: 1.0, 1: 2.0, 2: 3.0, 3: 0.0})
    engine = Engine(state, policy)
    limit = engine_module.MAX_CACHED_SHAPES
    shapes = [pod(1 + k) for k in range(limit + 1)]  # a shape key per cpu_m
    for p in shapes[:limit]:
        engine.scores(p, engine.feasible(p))
    engine.scores(shapes[0], engine.feasible(shapes[0]))  # used again: now the newest
    policy.calls.clear()
    engine.scores(shapes[limit], engine.feasible(shapes[limit]))  # one too many
    assert sorted(policy.calls) == [0, 1, 2, 3]
    assert engine._cache.shape[1] == limit  # no wider: a column was reused
    policy.calls.clear()
    engine.scores(shapes[0], engine.feasible(shapes[0]))  # kept
    assert policy.calls == []
    engine.scores(shapes[1], engine.feasible(shapes[1]))  # the least recently used: gone
    assert sorted(policy.calls) == [0, 1, 2, 3]
    for p in (shapes[0], shapes[1], shapes[limit]):  # nothing mixed up in the reused slot
        assert engine.scores(p, engine.feasible(p)).tolist() == [1.0, 2.0, 3.0, 0.0]


@pytest.mark.parametrize(
    "name",
    [
        "best-fit",
        "dot-product",
        "fgd",
        "gpu-clustering",
        "gpu-packing",
        "least-allocated",
        "most-allocated",
        "stowage",
        "volcano-binpack",
    ],
)
def test_cached_choice_equals_a_fresh_engine_after_placements(name):
    rng = np.random.default_rng(7)
    state = cluster(
        (64000, 256 * GIB, 8, "A100"),
        (32000, 128 * GIB, 4, "V100"),
        (96000, 512 * GIB, 8, "V100"),
        (16000, 64 * GIB, 2, "T4"),
        (48000, 128 * GIB),
        (128000, 512 * GIB, 8, "A100"),
    )
    kinds = [
        lambda k: pod(int(rng.integers(0, 8000)), GIB, gpus=1, milli=int(rng.integers(1, 1000))),
        lambda k: pod(int(rng.integers(0, 8000)), GIB, gpus=1),
        lambda k: pod(int(rng.integers(0, 16000)), 2 * GIB, gpus=2),
        lambda k: pod(int(rng.integers(0, 16000)), GIB),
        lambda k: pod(4000, GIB, gpus=1, milli=500, models={"V100"}),
    ]
    workload = [kinds[int(rng.integers(0, len(kinds)))](k) for k in range(200)]
    policy = build_policy(name, None, PolicyContext(workload=workload, seed=1))
    rank = np.array([3, 1, 4, 0, 5, 2])
    engine = Engine(state, policy, rank)
    placed = 0
    for p in workload:
        fresh = Engine(state, policy, rank).choose(p)
        chosen = engine.place(p)
        assert chosen == fresh, (name, p)
        placed += chosen is not None
    assert placed > 20
    if name == "stowage":
        assert policy.epoch >= 2  # the model was relearnt mid-run, and the cache kept up


def test_state_ids_stay_one_per_distinct_state_through_renumbering():
    state = cluster((10_000_000, 8 * GIB, 2), (10_000_000, 8 * GIB, 2), (1000, GIB))
    assert state.state_id[0] == state.state_id[1] != state.state_id[2]  # alike while idle
    for k in range(5000):  # more states than are remembered: ids are renumbered on the way
        occupy(state, k % 2, cpu=k + 1)
        state.check()  # equal ids exactly for equal states
    assert len(state._state_ids) < 5000
    state.release(Placement(0, ()), 1, 0, 0, None)
    state.check()
