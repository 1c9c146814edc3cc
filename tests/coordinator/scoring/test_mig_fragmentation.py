"""Placement on MIG slices and fragmentation per profile: each rule has a case that breaks
without it (alignment, the profile's own slices, CPU, instance count)."""

from __future__ import annotations

import pytest

from coordinator.scoring.mig.fragmentation import (
    MILLI_PER_SLICE,
    MigFragmentation,
    MigShape,
    best_choice,
    typical,
)
from coordinator.scoring.mig.profiles import GEOMETRIES, H100_80GB
from coordinator.scoring.mig.slices import EMPTY, free_starts, span, take

P = H100_80GB.profiles
G1, G1M, G1W, G2, G3, G4, G7 = (
    P[n] for n in ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
)


def gpu(*placed: tuple[str, int]) -> tuple[int, int]:
    g = EMPTY
    for name, start in placed:
        g = take(P[name], g, start)
    return g


def test_a_4g_needs_slices_0_to_3_free() -> None:
    assert free_starts(G4, EMPTY) == [0]
    assert free_starts(G4, gpu(("1g.10gb", 0))) == []  # six compute slices free, none aligned
    assert free_starts(G4, gpu(("1g.10gb", 6))) == [0]
    assert free_starts(G3, gpu(("1g.10gb", 0))) == [4]


def test_starts_follow_each_profiles_alignment() -> None:
    assert free_starts(G2, gpu(("1g.10gb", 1))) == [2, 4]  # not 1: a 2g starts at 0, 2 or 4
    assert free_starts(G1W, gpu(("1g.10gb", 3))) == [0, 4, 6]
    assert free_starts(G1, gpu(("4g.40gb", 0))) == [4, 5, 6]  # never slice 7
    assert free_starts(G7, gpu(("1g.10gb", 6))) == []


def room(profile, g) -> int:
    return len(free_starts(profile, g))


def test_free_starts_count_instances_together() -> None:
    assert [room(p, EMPTY) for p in (G1, G1W, G2, G3, G4, G7)] == [7, 4, 3, 2, 1, 1]
    assert room(G3, gpu(("2g.20gb", 2))) == 1
    assert room(G2, gpu(("3g.40gb", 4))) == 2


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: g.model)
def test_no_two_placements_of_one_profile_overlap(geometry) -> None:
    """What lets the free starts count instances that fit together."""
    for p in geometry.profiles.values():
        spans = [span(p, s) for s in p.starts]
        assert not any(a & b for k, a in enumerate(spans) for b in spans[k + 1 :]), p.name
        assert max(p.starts) + p.memory <= 8, p.name


def test_taking_tracks_compute_apart_from_memory() -> None:
    assert gpu(("1g.20gb", 0)) == (0b11, 1)
    assert gpu(("2g.20gb", 0)) == (0b11, 2)
    assert gpu(("4g.40gb", 0), ("3g.40gb", 4)) == (0xFF, 7)


@pytest.mark.parametrize(
    ("profile", "start", "placed"),
    [(G4, 4, ()), (G2, 1, ()), (G3, 4, (("2g.20gb", 4),)), (G1M, 0, ())],
)
def test_a_placement_off_the_rules_is_refused(profile, start, placed) -> None:
    with pytest.raises(ValueError, match="cannot start"):
        take(profile, gpu(*placed), start)


def test_media_profiles_are_not_placed_on_free_slices() -> None:
    assert free_starts(G1M, EMPTY) == []


def frag(*shapes: tuple[MigShape, float]) -> MigFragmentation:
    return MigFragmentation(H100_80GB, list(shapes))


def test_free_slices_a_profile_cannot_use_are_fragmented() -> None:
    only_4g = frag((MigShape(0, "4g.40gb", 1), 1.0))
    blocked = gpu(("1g.10gb", 0))  # six compute slices free, but not slices 0-3
    open_ = gpu(("1g.10gb", 6))
    # One GPU of each: the blocked GPU's six free slices are what the 4g cannot use.
    assert only_4g.node(8000, [blocked, open_]) == pytest.approx(6 * MILLI_PER_SLICE)
    assert only_4g.node(8000, [open_]) == 0.0
    assert only_4g.node(8000, [blocked]) == pytest.approx(6 * MILLI_PER_SLICE)


def test_a_node_that_cannot_serve_the_shape_is_all_fragmented() -> None:
    two_7g = frag((MigShape(0, "7g.80gb", 2), 1.0))
    assert two_7g.node(0, [EMPTY, gpu(("1g.10gb", 0))]) == pytest.approx(13 * MILLI_PER_SLICE)
    assert two_7g.node(0, [EMPTY, EMPTY]) == 0.0
    cpu_heavy = frag((MigShape(4000, "1g.10gb", 1), 1.0))
    assert cpu_heavy.node(3999, [EMPTY]) == pytest.approx(7 * MILLI_PER_SLICE)
    assert cpu_heavy.node(4000, [EMPTY]) == 0.0


def test_weights_add_per_profile() -> None:
    mixed = frag((MigShape(0, "4g.40gb", 1), 0.25), (MigShape(0, "1g.10gb", 1), 0.75))
    blocked = gpu(("1g.10gb", 0))
    assert mixed.node(0, [blocked]) == pytest.approx(0.25 * 6 * MILLI_PER_SLICE)


def test_an_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="5g.50gb: not a MIG profile of H100-80GB"):
        frag((MigShape(0, "5g.50gb", 1), 1.0))


def test_a_1g_goes_where_it_keeps_the_4g_placeable() -> None:
    """FGD's share view sees slices 0 and 4 alike; the MIG view keeps 0-3 whole."""
    mixed = frag((MigShape(0, "4g.40gb", 1), 0.5), (MigShape(0, "1g.10gb", 1), 0.5))
    choice = best_choice(mixed, 1000, 0, [EMPTY], G1, 1)
    assert choice is not None
    ((device, start),) = choice.taken
    assert device == 0 and start >= 4
    assert choice.after == choice.before == 0.0


def test_best_choice_picks_the_gpu_and_counts_instances() -> None:
    with_7g = frag((MigShape(0, "3g.40gb", 1), 0.5), (MigShape(0, "7g.80gb", 1), 0.5))
    half = gpu(("3g.40gb", 0))
    choice = best_choice(with_7g, 0, 0, [EMPTY, half], G3, 1)
    assert choice is not None and choice.taken == ((1, 4),)  # keeps the empty GPU for a 7g
    # 3g+3g strands one compute slice, which no profile can use any more
    assert (choice.before, choice.after) == pytest.approx(
        (4 * 0.5 * MILLI_PER_SLICE, MILLI_PER_SLICE)
    )
    only_3g = frag((MigShape(0, "3g.40gb", 1), 1.0))
    both = best_choice(only_3g, 0, 0, [half, half], G3, 2)
    assert both is not None and both.taken == ((0, 4), (1, 4))
    assert best_choice(only_3g, 0, 0, [half], G3, 2) is None
    assert best_choice(only_3g, 0, 100, [EMPTY], G3, 1) is None


def test_typical_shapes_weigh_by_count() -> None:
    shapes = [MigShape(0, "1g.10gb", 1)] * 3 + [MigShape(0, "7g.80gb", 1)]
    assert typical(shapes, coverage=1.0) == [
        (MigShape(0, "1g.10gb", 1), 0.75),
        (MigShape(0, "7g.80gb", 1), 0.25),
    ]
