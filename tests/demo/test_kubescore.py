"""kube-scheduler's scoring as the demo reproduces it, against values worked out by hand
from the Go code quoted in ``hack/demo/kubescore.py``."""

from __future__ import annotations

import numpy as np
import pytest

from hack.demo import kubescore

GI = 2**30


def a(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_least_allocated_averages_the_free_share_per_resource_in_integers():
    # node 0: cpu (4000-1000)*100//4000 = 75, memory (8-6)*100//8 = 25 -> 100//2 = 50
    # node 1: cpu 2000*100//3000 = 66 (66.7 truncated), memory 1*100//3 = 33 -> 99//2 = 49
    # node 2: cpu over allocatable -> 0, memory nothing requested -> 100 -> 50
    # node 3: no memory allocatable: left out, cpu alone -> 75
    scores = kubescore.least_allocated(
        (a(1000, 1000, 5000, 1000), a(6 * GI, 2 * GI, 0, 5 * GI)),
        (a(4000, 3000, 4000, 4000), a(8 * GI, 3 * GI, 8 * GI, 0)),
    )
    assert scores.tolist() == [50, 49, 50, 75]


def test_balanced_allocation_is_one_minus_half_the_gap_truncated_and_capped_at_full():
    # node 0: 0.25 and 0.75 -> std 0.25 -> 75
    # node 1: cpu 1.5 capped to 1, memory 0.5 -> 75
    # node 2: 1/3 and 0 -> std 1/6 -> 83.3 -> 83
    # node 3: no memory allocatable -> one fraction -> std 0 -> 100
    scores = kubescore.balanced_allocation(
        (a(1000, 6000, 1000, 3000), a(6 * GI, 4 * GI, 0, 1)),
        (a(4000, 4000, 3000, 4000), a(8 * GI, 8 * GI, 8 * GI, 0)),
    )
    assert scores.tolist() == [75, 75, 83, 100]


def test_the_extender_score_counts_weight_times_ten_per_point():
    # 150 + 7*5*10 = 500; 120 + 10*5*10 = 620
    assert kubescore.with_extender(a(150, 120), a(7, 10), 5).tolist() == [500, 620]


@pytest.mark.parametrize(
    ("nodes", "percentage", "expected"),
    [
        (50, 0, 50),  # under 100 nodes: every one
        (99, 0, 99),
        (100, 0, 100),  # 50 % of 100 is 50, but never fewer than 100
        (1000, 0, 420),  # 50 - 1000/125 = 42 %
        (5000, 0, 500),  # 50 - 40 = 10 %
        (10000, 0, 500),  # 50 - 80 < 5: 5 % floor
        (1000, 30, 300),  # a configured percentage
        (1000, 100, 1000),
    ],
)
def test_how_many_feasible_nodes_a_pass_stops_at(nodes, percentage, expected):
    assert kubescore.feasible_to_find(nodes, percentage) == expected


def test_a_pass_stops_at_enough_feasible_nodes_and_the_next_starts_after_the_last_looked_at():
    walk = kubescore.NodeWalk(200)  # finds 100 (49 % of 200 is 98)
    fits = np.ones(200, dtype=bool)
    fits[:10] = False
    first = walk.take(fits)
    assert first.tolist() == list(range(10, 110))  # looked at 0..109
    assert walk.start == 110
    second = walk.take(fits)
    assert second.tolist() == list(range(110, 200)) + list(range(10, 20))
    assert walk.start == 20  # 110 + 110 looked at, around


def test_a_pass_with_fewer_feasible_nodes_than_wanted_looks_at_every_node():
    walk = kubescore.NodeWalk(150)
    walk.start = 7
    fits = np.arange(150) % 2 == 0
    assert walk.take(fits).tolist() == [i % 150 for i in range(8, 157, 2)]
    assert walk.start == 7


def test_the_best_total_wins_and_ties_are_drawn_among_the_best_only():
    rng = np.random.default_rng(1)
    assert kubescore.pick(a(3, 9, 7), rng) == 1
    drawn = {kubescore.pick(a(3, 7, 7, 1), rng) for _ in range(50)}
    assert drawn == {1, 2}


def test_a_pod_without_requests_counts_as_100m_and_200mib():
    assert kubescore.non_zero(0, 0) == (100, 200 * 2**20)
    assert kubescore.non_zero(250, 5) == (250, 5)
