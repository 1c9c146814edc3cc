"""Gang locality's rules, one test each: the domain holding most of the gang wins while it
has room for the rest; a domain without that room loses to one with it; a gang no domain
holds goes where the fewest will; NVLink islands within a node; the work bound.

Every cluster here is of GPU nodes of 8 GPUs and pods of one whole GPU (nothing else
asked), so a node's room is its free GPUs."""

from __future__ import annotations

import numpy as np
import pytest

from coordinator.scoring import ganglocality
from coordinator.scoring.ganglocality import Gang, domains_of, islands, locality, ranked
from coordinator.state.cluster import ClusterState
from coordinator.state.kubeobjects import MAX_GANG_SIZE
from coordinator.state.signals import NodeSignals
from tests.coordinator.scoring.builders import cluster, occupy, pod

RACK = "example.com/rack"
MEMBER = pod(gpus=1)


def gpu_nodes(count: int, gpus: int = 8) -> ClusterState:
    return cluster(*[(64_000, 256 << 30, gpus)] * count)


def racks(*names: str) -> ganglocality.Domains:
    """Domains of one label level: node i in rack ``names[i]``."""
    return domains_of([{RACK: name} for name in names], [RACK])


def gang(size: int, *landed: int) -> Gang:
    return Gang("ns/g", size, np.array(landed, dtype=np.int64))


def used(state: ClusterState, i: int, gpus: int) -> None:
    """Take ``gpus`` whole GPUs of node ``i``."""
    occupy(state, i, gpu_used=[1000] * gpus)


def test_the_domain_holding_the_gang_wins_while_it_has_room() -> None:
    state = gpu_nodes(4)
    term = locality(state, MEMBER, gang(4, 2), racks("a", "a", "b", "b")).term
    # Every rack and node has room for the 3 remaining: rack b holds the landed member,
    # and within it node n2 does.
    assert term[2] > term[3] > term[0]
    assert term[0] == term[1]


def test_more_landed_members_win_over_fewer() -> None:
    state = gpu_nodes(4)
    term = locality(state, MEMBER, gang(8, 0, 2, 3), racks("a", "a", "b", "b")).term
    assert term[3] > term[0]  # rack b holds two members, rack a one; each node one


def test_a_domain_without_room_for_the_rest_loses_to_one_with_it() -> None:
    state = gpu_nodes(4)
    for i in (2, 3):
        used(state, i, 7)  # rack b: 2 GPUs free in all, and both members landed there
    loc = locality(state, MEMBER, gang(5, 2, 3), racks("a", "a", "b", "b"))
    # 3 remaining: rack a has room (16), rack b (2) not: a wins, landed members or not.
    assert loc.term[0] > loc.term[2]
    assert loc.levels[0].room.tolist() == [3, 3, 2, 2]


def test_a_gang_no_domain_holds_goes_where_the_fewest_will() -> None:
    state = gpu_nodes(6)  # every node alike: only the racks tell them apart
    # 30 members, nothing landed: racks of 1, 2 and 3 nodes hold 8, 16, 24: none all; c
    # holds most, then b.
    term = locality(state, MEMBER, gang(30), racks("a", "b", "b", "c", "c", "c")).term
    assert term[3] > term[1] > term[0]
    assert term[3] == term[5]


def test_unlabelled_nodes_are_domains_of_their_own_and_absent_keys_no_level() -> None:
    found = domains_of([{RACK: "a"}, {}, {RACK: "a"}, {}], ["absent.example.com/x", RACK])
    assert found.keys == (RACK,)
    ids = found.ids[0].tolist()
    assert ids[0] == ids[2] and len({ids[0], ids[1], ids[3]}) == 3


def test_an_nvlink_island_holding_the_rest_wins_within_equal_nodes() -> None:
    state = gpu_nodes(2)
    two_islands = tuple(
        tuple(1 if a != b and (a < 4) == (b < 4) else 0 for b in range(8)) for a in range(8)
    )
    one_island = tuple(tuple(1 if a != b else 0 for b in range(8)) for a in range(8))
    state.set_signals(0, NodeSignals(gpu_links=two_islands))
    state.set_signals(1, NodeSignals(gpu_links=one_island))
    assert islands(two_islands) == (0, 0, 0, 0, 1, 1, 1, 1)
    loc = locality(state, MEMBER, gang(6), racks("a", "a"))
    island = loc.levels[-1]
    assert island.name == "nvlink-island"
    assert island.room.tolist() == [4, 6]
    assert loc.term[1] > loc.term[0]


def test_the_term_only_adds_to_the_policys_scaled_scores() -> None:
    raw = np.array([10.0, np.nan, 30.0, 20.0])
    term = np.array([0.5, 1.0, 0.0, 0.0])
    out = ranked(raw, term, 10.0)
    assert np.isnan(out[1])  # a node the pod cannot take stays out
    assert out.tolist()[0] == 5.0 and out.tolist()[2:] == [1.0, 0.5]
    assert ranked(raw, term, 0.0)[[0, 2, 3]].tolist() == [0.0, 1.0, 0.5]


@pytest.mark.parametrize("size", [MAX_GANG_SIZE, 1])
def test_work_is_bounded_by_the_nodes_at_the_largest_gang(size: int) -> None:
    """15,000 nodes in 1,000 racks, a gang of the largest size a PodGroup may give and the
    most members a call counts: the same passes over the nodes as for any gang."""
    state = gpu_nodes(15_000)
    domains = racks(*[f"r{i // 15}" for i in range(15_000)])
    landed = np.arange(ganglocality.MAX_MEMBERS_COUNTED, dtype=np.int64) % 15_000
    loc = locality(state, MEMBER, Gang("ns/g", size, landed), domains)
    assert loc.term.shape == (15_000,)
    assert np.isfinite(loc.term).all() and float(loc.term.min()) >= 0.0
    assert loc.gang.remaining == max(size - len(landed), 1)


def test_the_benchmark_times_the_term_next_to_the_policy() -> None:
    from hack.bench import gang_locality

    found = gang_locality.measure(64, "stowage", repeat=1)
    assert found["nodes"] == 64
    timed = [k for k in found if k.endswith("_ms")]
    assert timed == ["policy_cold_ms", "policy_warm_ms", "term_gang_of_8_ms",
                     "term_largest_gang_ms"]  # fmt: skip
    assert all(found[k] >= 0 for k in timed)
