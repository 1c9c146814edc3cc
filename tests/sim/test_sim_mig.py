"""The MIG trace's derivation and the MIG replay, on cases worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim import migreplay
from hack.sim.migtrace import GEOMETRY, MigPod, mig_pod, profile_for

P = GEOMETRY.profiles


@pytest.mark.parametrize(
    ("milli", "profile"),
    [
        (50, "1g.10gb"),
        (125, "1g.10gb"),  # 1/8 of the memory, 1/7 of the compute
        (126, "1g.20gb"),  # more memory than a 1g.10gb has
        (143, "2g.20gb"),  # more compute than 1/7
        (250, "2g.20gb"),
        (270, "3g.40gb"),  # more memory than 2/8
        (428, "3g.40gb"),
        (429, "4g.40gb"),  # above 3/7
        (500, "4g.40gb"),
        (501, "7g.80gb"),  # more memory than a 4g's half
        (810, "7g.80gb"),
    ],
)
def test_a_share_gets_the_smallest_profile_covering_compute_and_memory(milli, profile) -> None:
    assert profile_for(milli).name == profile


def test_pods_convert_by_kind() -> None:
    share = mig_pod(PodRequest("s", 4000, 2**30, gpus=1, gpu_milli=320))
    assert (share.profile, share.count, share.share_milli) == (P["3g.40gb"], 1, 320)
    whole = mig_pod(PodRequest("w", 8000, 2**30, gpus=4, gpu_milli=1000))
    assert (whole.profile, whole.count) == (P["7g.80gb"], 4)
    cpu = mig_pod(PodRequest("c", 1000, 2**30))
    assert (cpu.profile, cpu.count) == (None, 0)


ONE_GPU = [NodeSpec("n0", 64_000, 2**40, gpus=1)]


def replay(pods: list[MigPod], policy: str, nodes=ONE_GPU) -> migreplay.Result:
    return migreplay.replay(nodes, pods, np.arange(len(nodes)), policy)


def test_the_share_view_strands_slices_the_placement_rule_keeps() -> None:
    """A 3g then a 4g on one GPU: the share view sees 4 free sevenths after the 3g and puts
    the 3g at slice 0 (its lowest start), where the 4g can no longer go; the MIG view puts
    it at slice 4 and both fit."""
    pods = [MigPod("a", 1000, 2**30, P["3g.40gb"], 1), MigPod("b", 1000, 2**30, P["4g.40gb"], 1)]
    share = replay(pods, "fgd")
    mig = replay(pods, "fgd-mig")
    assert (share.failed_gpu_pods, share.unallocated_pct) == (1, pytest.approx(400 / 7))
    assert (mig.failed_gpu_pods, mig.unallocated_pct) == (0, 0.0)
    assert share.demand_pct == mig.demand_pct == 100.0


def test_cpu_memory_and_instances_limit_both_views() -> None:
    heavy = [
        MigPod("cpu", 70_000, 2**30, P["1g.10gb"], 1),
        MigPod("mem", 1000, 2**41, P["1g.10gb"], 1),
        MigPod("two", 1000, 2**30, P["7g.80gb"], 2),
        MigPod("fits", 1000, 2**30, P["7g.80gb"], 1),
        MigPod("late", 1000, 2**30, P["1g.10gb"], 1),
    ]
    for policy in migreplay.POLICIES:
        result = replay(heavy, policy)
        assert (result.failed_gpu_pods, result.gpu_pods, result.unallocated_pct) == (4, 5, 0.0)


def test_cpu_only_pods_take_the_first_node_by_rank_with_room() -> None:
    """g1 goes to n0 (rank first); the CPU pod then fills n1's CPU, so g2 (the shape scored
    for g1, n1's score cached) finds no node: n1 must be scored again."""
    nodes = [NodeSpec("n0", 1000, 2**30, gpus=1), NodeSpec("n1", 1000, 2**30, gpus=1)]
    pods = [
        MigPod("g1", 1000, 2**20, P["7g.80gb"], 1),
        MigPod("c", 1000, 2**20),
        MigPod("g2", 1000, 2**20, P["7g.80gb"], 1),
    ]
    for policy in migreplay.POLICIES:
        result = migreplay.replay(nodes, pods, np.array([0, 1]), policy)
        assert (result.failed_gpu_pods, result.unallocated_pct) == (1, 50.0)


def test_the_table_names_every_run() -> None:
    results = [
        migreplay.Result(p, w, s, 1.0 + s, 2.0, 3, 10, 120.0, 0.5)
        for w in migreplay.WORKLOADS
        for p in migreplay.POLICIES
        for s in (1, 2)
    ]
    text = migreplay.table(results)
    assert "| all | fgd | 2.00 ± 0.00 | 2.50 ± 0.71 | 30.00 ± 0.00 | 120 | 0.5 |" in text
    assert "| share | fgd-mig |" in text
    assert "Seeds 1, 2;" in text
