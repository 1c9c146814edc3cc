"""The consolidation replay (``hack.bench.consolidation_replay``) on hand-made traces whose
outcome is worked out by hand. Three 8-GPU nodes, every pod 1 core and 1 GiB unless
said; arrivals at their creation times (speedup 1), a pass every 100 s from the first
arrival (at 100 here: the last pod arrives at 150, where the replay stops).

**Two half-empty nodes.** keep-a (4 GPUs) takes an empty node X, short-a (4) fills it;
keep-b takes Y, short-b fills it; the shorts leave at 51 and 53: X and Y hold 4 of 8
GPUs each. At 100 the drain planner (shipped settings) empties one of them into the
other: one move, one node freed. HighNodeUtilization's thresholds are 20 %: at 50 %
neither node is underutilised, nothing moves. At 150 ``late`` (4 GPUs) fits beside a keep
pod, except after the drain, where the one node in use is full and a node comes back.

**Two nearly empty nodes beside a full one.** hog (63.5 cores, 6 GPUs) takes C; one-a
(1 GPU) finds no CPU there and takes S1, seven-a (7) fills S1; one-b takes S2,
seven-b fills it; the sevens leave: S1 and S2 hold one 1-GPU pod each (12.5 %), C no
room for a core. The drain planner moves one of them beside the other (C refuses it) and
frees a node. HighNodeUtilization finds S1 and S2 under every threshold (C is not), evicts
the first one's pod, and stops: C's 0.5 free core, summed, is used up by that pod's
core. FGD, placing it with no planner, puts it back on its own emptied node: a node where
it leaves 7 GPUs free hurts no typical shape but hog's, while beside the other 1-GPU pod
it would leave 6, too few for the 7-GPU shape (weights 1/2 for 1 GPU, 1/3 for 7, 1/6 for
hog: 7000/6 < 6000/3 − 1000/6). One pod moved, no node freed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.bench.consolidation_replay import Replay, main
from hack.bench.trace_replay import TraceReplay, load_trace
from hack.sim.trace import load_nodes

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"{n},64000,262144,8,A100\n" for n in ("n1", "n2", "n3")
)
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n"
HALF_EMPTY = HEADER + (
    "keep-a,1000,1024,4,1000,,0,1000\n"
    "short-a,1000,1024,4,1000,,1,51\n"
    "keep-b,1000,1024,4,1000,,2,1000\n"
    "short-b,1000,1024,4,1000,,3,53\n"
    "late,1000,1024,4,1000,,150,1000\n"
)
BESIDE_FULL = HEADER + (
    "hog,63500,1024,6,1000,,0,1000\n"
    "one-a,1000,1024,1,1000,,1,1000\n"
    "seven-a,1000,1024,7,1000,,2,50\n"
    "one-b,1000,1024,1,1000,,3,1000\n"
    "seven-b,1000,1024,7,1000,,4,52\n"
    "late,1000,1024,1,1000,,150,1000\n"
)


def files(tmp_path: Path, pods: str) -> tuple[Path, Path]:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(pods)
    return tmp_path / "nodes.csv", tmp_path / "pods.csv"


def replay(tmp_path: Path, pods: str, variant: str, seed: int = 1) -> Replay:
    nodes, pod_list = files(tmp_path, pods)
    run = Replay(load_nodes(nodes), load_trace(pod_list, 1.0), seed, 100.0, variant)
    run.run()
    return run


def where(run: Replay) -> dict[str, str]:
    return {run.pods[k].request.name: run.state.names[p.node] for k, p in run.placed.values()}


# Nodes in use: 1 over [0,2), 2 over [2,150) without a drain (298 node-seconds of 150 s);
# 2 over [2,100), 1 over [100,150) with it (248). GPUs free on them: 4 over [0,1) and
# [2,3), 4 over [51,53), then 8 (two nodes of 4 free) to 150 without the drain, to 100
# with it: 792 and 392 GPU-seconds, of 8 x 298 and 8 x 248 GPU-seconds in use.
WITHOUT_DRAIN = {
    "nodes_in_use_mean": 1.99,  # 298 / 150
    "nodes_in_use_end": 2,
    "nodes_added": 2,
    "nodes_freed": 0,
    "idle_gpus_in_use_mean": 5.28,  # 792 / 150
    "unallocated_in_use_pct": 33.22,  # 792 / 2384
    "moved": 0,
    "moved_per_freed": None,
    "pending_by_move": 0,
    "pending_end": 0,
    "unplaceable": 0,
}


@pytest.mark.parametrize("variant", ["none", "hnu"])
def test_two_half_empty_nodes_stay_without_the_planner(tmp_path: Path, variant: str) -> None:
    run = replay(tmp_path, HALF_EMPTY, variant)
    assert run.row() == WITHOUT_DRAIN
    spots = where(run)
    assert spots["keep-a"] != spots["keep-b"]


def test_the_drain_planner_frees_one_of_two_half_empty_nodes(tmp_path: Path) -> None:
    run = replay(tmp_path, HALF_EMPTY, "stowage")
    assert run.row() == {
        **WITHOUT_DRAIN,
        "nodes_in_use_mean": 1.65,  # 248 / 150
        "nodes_added": 3,  # late brings a node back
        "nodes_freed": 1,
        "idle_gpus_in_use_mean": 2.61,  # 392 / 150
        "unallocated_in_use_pct": 19.76,  # 392 / 1984
        "moved": 1,
        "moved_per_freed": 1.0,
    }
    spots = where(run)
    assert spots["keep-a"] == spots["keep-b"] != spots["late"]


def test_the_drain_planner_moves_a_nearly_empty_node_beside_the_other(tmp_path: Path) -> None:
    run = replay(tmp_path, BESIDE_FULL, "stowage")
    row = run.row()
    assert (row["nodes_freed"], row["moved"], row["nodes_in_use_end"]) == (1, 1, 2)
    spots = where(run)
    assert spots["one-a"] == spots["one-b"] == spots["late"] != spots["hog"]


CAPPED = HEADER + (
    "".join(f"y{i},1000,1024,1,1000,,{i},1000\n" for i in range(5))
    + "filler,20000,1024,0,0,,5,50\n"  # on Y beside the five: x finds 39 cores there
    + "x,48000,1024,0,0,,6,1000\n"
    + "late,1000,1024,1,1000,,150,1000\n"
)


def test_the_planner_drains_no_node_over_the_patrol_threshold_nor_past_the_caps(
    tmp_path: Path,
) -> None:
    """Y holds five 1-GPU pods (62.5 % of its GPUs: a candidate), X one CPU pod of 48
    cores (75 % of its CPU: none). Y's five evictions exceed the shipped cap of 4 a node
    a cycle, and X, which would fit on Y, is over the threshold: nothing moves."""
    run = replay(tmp_path, CAPPED, "stowage")
    row = run.row()
    assert (row["moved"], row["nodes_freed"], row["nodes_in_use_end"]) == (0, 0, 2)
    spots = where(run)
    assert len({spots[f"y{i}"] for i in range(5)}) == 1
    assert spots["x"] != spots["y0"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_high_node_utilization_stops_at_the_summed_room_and_fgd_puts_the_pod_back(
    tmp_path: Path, seed: int
) -> None:
    """Whatever the seed's node names and tie-breaking rank: the node left empty is never
    the one FGD takes (that would count its source freed)."""
    run = replay(tmp_path, BESIDE_FULL, "hnu", seed)
    row = run.row()
    assert (row["nodes_freed"], row["moved"], row["pending_by_move"]) == (0, 1, 0)
    assert row["nodes_in_use_end"] == 3
    spots = where(run)
    assert len({spots["one-a"], spots["one-b"], spots["hog"]}) == 3


def test_high_node_utilization_does_nothing_when_every_node_is_under_its_thresholds(
    tmp_path: Path,
) -> None:
    """Without hog, S1 and S2 are the only nodes in use and both underutilised: the
    descheduler's "all nodes are underutilized" rule leaves them; the planner drains one."""
    pods = HEADER + BESIDE_FULL.split("\n", 2)[2]
    hnu, stowage = (replay(tmp_path, pods, v).row() for v in ("hnu", "stowage"))
    assert (hnu["moved"], hnu["nodes_freed"], hnu["nodes_in_use_end"]) == (0, 0, 2)
    assert (stowage["moved"], stowage["nodes_freed"], stowage["nodes_in_use_end"]) == (1, 1, 1)


def test_a_pod_moved_and_then_leaving_leaves_once(tmp_path: Path) -> None:
    """keep-a or keep-b moves at 100 and both leave at 1000: with the last arrival after
    that, every pod has left once and the state is whole (``run`` checks it)."""
    pods = HALF_EMPTY.replace("late,1000,1024,4,1000,,150,1000", "late,1000,1024,4,1000,,1500,1600")
    run = replay(tmp_path, pods, "stowage")
    assert set(where(run)) == {"late"}
    assert run.row()["moved"] == 1


class IntoTheQueue(TraceReplay):
    """When short-a leaves, keep-a is taken off its node into the queue, as a move that
    found no room leaves a pod (the base replay never tries the queue again)."""

    def _depart(self, uid: str) -> None:
        super()._depart(uid)
        if self.pods[int(uid.removeprefix("pod-"))].request.name == "short-a":
            k = self.release("pod-0")  # keep-a, first in arrival order
            self.pending["pod-0"] = k


def test_a_pod_moved_into_the_queue_leaves_from_it_at_its_time(tmp_path: Path) -> None:
    pods = HALF_EMPTY.replace("late,1000,1024,4,1000,,150,1000", "late,1000,1024,4,1000,,1500,1600")
    nodes, pod_list = files(tmp_path, pods)
    run = IntoTheQueue(load_nodes(nodes), load_trace(pod_list, 1.0), 1)
    run.run()
    assert run.pending == {}
    assert {run.pods[k].request.name for k, _ in run.placed.values()} == {"late"}


def test_bad_arguments_are_refused_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = files(tmp_path, HALF_EMPTY)
    args = ["--node-list", str(nodes), "--pods", str(pods), "--nodes", "3"]
    assert main([*args, "--every-min", "0"]) == 2
    assert "--every-min 0.0: expected a positive number" in capsys.readouterr().err
    assert main([*args, "--nodes", "4"]) == 2
    assert "--nodes 4: expected 1..3" in capsys.readouterr().err
    assert main([*args, "--seeds", "1,x"]) == 2
    assert "consolidation_replay:" in capsys.readouterr().err
    with pytest.raises(ValueError, match="variant: expected one of none, stowage, hnu"):
        Replay(load_nodes(nodes), load_trace(pods, 1.0), 1, 100.0, "drain")


def test_the_command_prints_every_variant_per_seed_and_writes_a_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = files(tmp_path, HALF_EMPTY)
    png = tmp_path / "nodes.png"
    argv = ["--node-list", str(nodes), "--pods", str(pods), "--nodes", "3", "--speedup", "1"]
    assert main([*argv, "--every-min", str(100 / 60), "--seeds", "1,2,3", "--png", str(png)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "pods.csv"
    rows = [line.split() for line in lines[3:12]]
    variants = ("none", "stowage", "hnu")
    assert [(r[0], r[1]) for r in rows] == [(s, v) for s in "123" for v in variants]
    assert [r[5] for r in rows] == ["0", "1", "0"] * 3  # nodes freed
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def test_a_pod_that_fits_nowhere_waits_until_a_departure_makes_room(tmp_path: Path) -> None:
    """Three 5-GPU pods take a node each; a 4-GPU pod fits on none (3 GPUs free on each)
    and waits; at 40 the first leaves, its node empties and comes back for the waiting pod.
    Nodes in use: 1 over [0,1), 2 over [1,2), 3 over [2,150): 447 node-seconds."""
    pods = HEADER + (
        "five-a,1000,1024,5,1000,,0,40\n"
        "five-b,1000,1024,5,1000,,1,1000\n"
        "five-c,1000,1024,5,1000,,2,1000\n"
        "waits,1000,1024,4,1000,,3,1000\n"
        "late,1000,1024,1,1000,,150,1000\n"
    )
    row = replay(tmp_path, pods, "none").row()
    assert row["nodes_in_use_mean"] == 2.98  # 447 / 150
    assert (row["nodes_added"], row["pending_end"]) == (4, 0)
