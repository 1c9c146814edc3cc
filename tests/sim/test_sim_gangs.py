"""The gang simulator: how gangs are derived from a pod sequence, and that the gang term
gathers them on a small cluster where the policy alone spreads them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from coordinator.scoring import registry
from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim import gangs
from hack.sim.arrivals import Arrivals

GIB = 1 << 30


def whole(k: int, gpus: int = 1) -> PodRequest:
    return PodRequest(f"w{k}", 4000, 8 * GIB, gpus, 1000)


def shared(k: int) -> PodRequest:
    return PodRequest(f"s{k}", 1000, GIB, 1, 500)


def test_whole_gpu_pods_of_one_shape_become_consecutive_gangs() -> None:
    sequence = [whole(0), shared(0), whole(1, 2), whole(2), PodRequest("c", 1000, GIB), whole(3)]
    sequence += [whole(k) for k in range(4, 30)]
    members = gangs.with_gangs(sequence, seed=7)
    assert Counter(m.pod.name for m in members) == Counter(p.name for p in sequence)
    # The pods in no gang keep their order; the rest are grouped.
    assert [m.pod.name for m in members if m.gang is None] == ["s0", "c"]
    by_gang: dict[str, list[int]] = {}
    for k, m in enumerate(members):
        if m.gang is not None:
            by_gang.setdefault(m.gang, []).append(k)
    for name, at in by_gang.items():
        assert at == list(range(at[0], at[0] + len(at))), name  # one after another
        shapes = {(members[k].pod.gpus, members[k].pod.cpu_m) for k in at}
        assert len(shapes) == 1
        assert {members[k].size for k in at} == {len(at)}
        assert len(at) <= max(gangs.GANG_SIZES)
    # w0 opens the first gang, where it arrived: first in the sequence.
    assert members[0].pod.name == "w0" and members[0].gang is not None
    assert gangs.with_gangs(sequence, seed=7) == members  # the seed decides
    # The 2-GPU pod is a shape of its own: a gang of one.
    assert next(m.size for m in members if m.pod.name == "w1") == 1


def test_the_term_gathers_gangs_the_policy_alone_spreads() -> None:
    nodes = [NodeSpec(f"n{i:02}", 64_000, 256 * GIB, 8, "V100") for i in range(16)]
    pods = [whole(k) for k in range(48)]
    members = [gangs.Member(p, f"g{k // 8}", 8) for k, p in enumerate(pods)]
    sequence = Arrivals(pods, np.arange(len(nodes), dtype=np.int64))
    outcome = {
        weight: gangs.run(
            nodes, sequence, members, registry.build_policy("least-allocated"), weight
        )
        for weight in (0.0, gangs.WEIGHT)
    }
    # LeastAllocated puts each pod on an empty node while there is one: the first two gangs
    # take a node per member, 8 nodes and (racks of 8 nodes) 1 rack each, then fill in.
    assert outcome[0.0].nodes_per_gang > 4
    # With the term each gang of 8 one-GPU pods fills one 8-GPU node.
    assert outcome[gangs.WEIGHT].nodes_per_gang == 1.0
    assert outcome[gangs.WEIGHT].racks_per_gang == 1.0
    assert outcome[0.0].gangs_whole == outcome[gangs.WEIGHT].gangs_whole == 6


def test_the_command_prints_and_writes_the_table(tmp_path: Path, capsys) -> None:
    nodes_csv = tmp_path / "nodes.csv"
    nodes_csv.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(f"n{i},64000,262144,8,V100\n" for i in range(16))
    )
    pods_csv = tmp_path / "pods.csv"
    pods_csv.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        + "".join(f"p{k},4000,8192,1,1000\n" for k in range(64))
    )
    argv = ["--nodes", str(nodes_csv), "--pods", str(pods_csv), "--policy", "least-allocated"]
    assert gangs.main([*argv, "--seeds", "1-3", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert printed == (tmp_path / "out" / "summary.md").read_text() + "\n"
    rows = [line for line in printed.splitlines() if line.startswith("| mean")]
    assert [row.split(" | ")[2] for row in rows] == ["off", "on (weight 2)"]
    assert gangs.main([*argv, "--seeds", "9-1"]) == 2
