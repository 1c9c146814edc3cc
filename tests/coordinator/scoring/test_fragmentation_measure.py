"""FGD's target workload (typical shapes) and fragmentation measure, F_n(s) and F_n(M)."""

from __future__ import annotations

import pytest

from coordinator.scoring.fragmentation import Fragmentation, Shape, typical_shapes
from tests.coordinator.scoring.builders import GIB, pod

A = Shape(1000, 1000, 1)
B = Shape(2000, 0, 0)
C = Shape(500, 500, 1)
D = Shape(4000, 1000, 2)


def workload(c_cpu: int = 500, c_milli: int = 500):
    """5 × A, 3 × B, 3 × C (cpu/milli adjustable), 1 × D — memory varies but is no part of
    a shape."""
    return (
        [pod(1000, k * GIB, gpus=1) for k in range(5)]
        + [pod(2000, k * GIB) for k in range(3)]
        + [pod(c_cpu, GIB, gpus=1, milli=c_milli) for _ in range(3)]
        + [pod(4000, GIB, gpus=2)]
    )


def test_shape_of_a_pod_ignores_memory_and_sorts_models():
    assert Shape.of(pod(1000, 5 * GIB, gpus=1)) == A
    assert Shape.of(pod(1, 0, gpus=1, milli=10, models={"V100", "A100"})) == Shape(
        1, 10, 1, ("A100", "V100")
    )


def test_typical_shapes_cut_at_coverage():
    # 12 pods; 0.9 needs 10.8: A (5) + B (3) = 8, + C (3) = 11 ≥ 10.8 → stop before D
    assert typical_shapes(workload(), 0.9) == [(A, 5 / 11), (B, 3 / 11), (C, 3 / 11)]
    # 0.6 needs 7.2: A + B = 8
    assert typical_shapes(workload(), 0.6) == [(A, 5 / 8), (B, 3 / 8)]
    # reaching the coverage exactly stops: 8/12 = 2/3
    assert typical_shapes(workload(), 8 / 12) == [(A, 5 / 8), (B, 3 / 8)]
    # 0.4 needs 4.8: A alone
    assert typical_shapes(workload(), 0.4) == [(A, 1.0)]
    assert typical_shapes(workload(), 1.0) == [(A, 5 / 12), (B, 3 / 12), (C, 3 / 12), (D, 1 / 12)]


def test_typical_shapes_equal_counts_take_the_larger_shape_first():
    # B (2000, 0, 0) beats C (500, 500, 1) on CPU, the first field
    assert [s for s, _ in typical_shapes(workload(), 0.6)] == [A, B]
    # C' (3000, 500, 1) beats B on CPU
    bigger = Shape(3000, 500, 1)
    assert [s for s, _ in typical_shapes(workload(c_cpu=3000), 0.6)] == [A, bigger]
    # equal CPU: gpu_milli decides, C'' (2000, 500, 1) beats B (2000, 0, 0)
    assert [s for s, _ in typical_shapes(workload(c_cpu=2000), 0.6)] == [A, Shape(2000, 500, 1)]


def test_typical_shapes_weights_sum_to_one():
    for coverage in (0.1, 0.5, 0.9, 0.95, 1.0):
        shapes = typical_shapes(workload(), coverage)
        assert sum(w for _, w in shapes) == pytest.approx(1.0)
        assert all(w > 0 for _, w in shapes)


def test_typical_shapes_of_nothing_is_empty():
    assert typical_shapes([], 0.95) == []


def test_typical_shapes_default_coverage_is_95_percent():
    # 19 × A, 1 × C: A covers exactly 95 %
    assert typical_shapes([pod(1000, 0, gpus=1)] * 19 + [pod(500, 0, 1, 500)]) == [(A, 1.0)]
    # 18 × A, 2 × C: A covers 90 %, C is needed
    assert typical_shapes([pod(1000, 0, gpus=1)] * 18 + [pod(500, 0, 1, 500)] * 2) == [
        (A, 0.9),
        (C, 0.1),
    ]


@pytest.mark.parametrize(
    ("cpu_free", "gpus", "model", "shape", "expected"),
    [
        (8000, (600, 1000), "V100", Shape(1000, 0, 0), 1600),  # CPU-only shape: all of R
        (8000, (600, 1000), "V100", Shape(1000, 500, 1, ("A100",)), 1600),  # model mismatch
        (8000, (600, 1000), "A100", Shape(1000, 500, 1, ("A100",)), 0),  # model ok, fits
        (500, (600, 1000), "V100", Shape(1000, 500, 1), 1600),  # lacks CPU
        (8000, (600, 1000), "V100", Shape(1000, 1000, 2), 1600),  # lacks GPUs
        (8000, (600, 1000), "V100", Shape(1000, 1000, 1), 600),  # fits: 600 < 1000 is lost
        (8000, (600, 300, 0, 1000), "V100", Shape(1000, 500, 1), 300),  # only 300 < 500
        (1000, (600, 1000), "V100", Shape(1000, 1000, 1), 600),  # CPU exactly enough
        (8000, (0, 0), "V100", Shape(1000, 0, 0), 0),  # nothing idle
    ],
)
def test_shape_fragment_cases(cpu_free, gpus, model, shape, expected):
    # One shape of weight 1: F_n is exactly that shape's fragment.
    assert Fragmentation([(shape, 1.0)]).node(cpu_free, tuple(gpus), model) == expected


def test_node_fragmentation_is_the_weighted_sum():
    frag = Fragmentation(
        [
            (Shape(1000, 1000, 1), 0.5),
            (Shape(2000, 0, 0), 0.25),
            (Shape(500, 500, 1, ("A100",)), 0.25),
        ]
    )
    # V100: 0.5·600 + 0.25·1600 + 0.25·1600 (no access) = 1100
    assert frag.node(4000, (600, 1000), "V100") == pytest.approx(1100)
    # A100: the third shape fits and loses nothing: 300 + 400 + 0
    assert frag.node(4000, (600, 1000), "A100") == pytest.approx(700)
    # 800 CPU: the first shape no longer fits → 0.5·1600 + 400 + 0
    assert frag.node(800, (600, 1000), "A100") == pytest.approx(1200)
    # device order does not matter (memoised on the sorted multiset)
    assert frag.node(4000, (1000, 600), "A100") == pytest.approx(700)


def test_no_typical_shapes_means_no_fragmentation():
    assert Fragmentation([]).node(1000, (300, 1000), "V100") == 0
