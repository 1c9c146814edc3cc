"""The defrag replay (``hack.bench.defrag_replay``) on a hand-made trace whose outcome is
worked out by hand: two 8-GPU nodes, two 7-GPU pods (one per node: nothing else fits)
and then two 1-GPU pods (one beside each), the 7-GPU pods leave, and an 8-GPU pod
arrives: 7 GPUs free on each node, 8 on none. FGD alone leaves it pending; with
migration one 1-GPU pod moves to the other node and the 8-GPU pod takes the emptied one."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.bench.defrag_replay import Replay, draw_nodes, load_trace, main
from hack.sim.trace import TraceError, load_nodes

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,8,A100\nn2,64000,262144,8,A100\n"
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n"
PODS = HEADER + (
    "seven-a,1000,1024,7,1000,,0,5\n"  # leaves at 5
    "seven-b,1000,1024,7,1000,,1,6\n"  # leaves at 6
    "one-c,1000,1024,1,1000,,2,1002\n"
    "one-d,1000,1024,1,1000,,3,1003\n"
    "one-e,1000,1024,1,1000,,4,1004\n"  # the cluster is full: placed at 5, in a round
    "eight,1000,1024,8,1000,,10,110\n"
    "v100,1000,1024,1,1000,V100,4,5\n"  # no V100 here: left out, counted
)
# GPUs allocated: 7 over [0,1), 14 over [1,2), 15 over [2,3), 16 over [3,5), 10 over
# [5,6), 3 over [6,10): 90 GPU-seconds of 16 GPUs x 10 s, so 43.75 % unallocated.
UNALLOCATED_PCT = 43.75


def files(tmp_path: Path, pods: str = PODS) -> tuple[Path, Path]:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(pods)
    return tmp_path / "nodes.csv", tmp_path / "pods.csv"


def replay(tmp_path: Path, migrate: bool) -> dict[str, object]:
    nodes, pods = files(tmp_path)
    return Replay(load_nodes(nodes), load_trace(pods, 1.0), 1, 1, migrate).run().row()


def test_without_migration_the_eight_gpu_pod_stays_pending(tmp_path: Path) -> None:
    row = replay(tmp_path, migrate=False)
    assert row["multi_arrived"] == 3  # the two 7-GPU pods and the 8-GPU one
    assert row["multi_at_once"] == 2
    assert row["multi_after_wait"] == 0 and row["multi_by_migration"] == 0
    assert row["multi_pending_at_end"] == 1
    assert row["moved"] == 0 and row["moved_per_migrated"] is None
    assert row["unplaceable"] == 1
    assert row["unallocated_gpu_pct"] == UNALLOCATED_PCT


def test_with_migration_one_pod_moves_and_the_eight_gpu_pod_is_placed(tmp_path: Path) -> None:
    row = replay(tmp_path, migrate=True)
    assert row["multi_at_once"] == 2
    assert row["multi_after_wait"] == 1 and row["multi_by_migration"] == 1
    assert row["multi_pending_at_end"] == 0
    assert row["moved"] == 1 and row["moved_per_migrated"] == 1.0
    assert row["mean_wait_s"] == 0.0  # placed in the round right after it arrived
    assert row["unallocated_gpu_pct"] == UNALLOCATED_PCT


def test_the_moved_pod_and_the_eight_gpu_pod_end_where_the_plan_put_them(tmp_path: Path) -> None:
    nodes, pods = files(tmp_path)
    run = Replay(load_nodes(nodes), load_trace(pods, 1.0), 1, 1, migrate=True)
    run.run()
    state = run.state
    where = {run.pods[k].request.name: state.names[p.node] for k, p in run.placed.values()}
    assert set(where) == {"one-c", "one-d", "one-e", "eight"}
    assert where["one-c"] == where["one-d"] == where["one-e"] != where["eight"]
    assert sorted(int((state.gpu_free[i] == 0).sum()) for i in range(2)) == [3, 8]
    (eight,) = (p for k, p in run.placed.values() if run.pods[k].request.name == "eight")
    assert len(eight.devices) == 8


def test_arrivals_are_sped_up_and_runtimes_kept(tmp_path: Path) -> None:
    _, pods = files(tmp_path)
    trace = load_trace(pods, 2.0)
    assert [(p.request.name, p.arrival_s, p.runtime_s) for p in trace][:2] == [
        ("seven-a", 0.0, 5.0),
        ("seven-b", 0.5, 5.0),
    ]


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("x,1000,1024,1,1000,,5,4\n", "deletion_time before creation_time"),
        ("x,1000,1024,1,1000,,,4\n", "creation_time and deletion_time needed"),
    ],
)
def test_a_row_without_usable_times_is_refused_naming_its_line(
    tmp_path: Path, row: str, says: str
) -> None:
    _, pods = files(tmp_path, HEADER + row)
    with pytest.raises(TraceError, match=f"pods.csv:2: {says}"):
        load_trace(pods, 1.0)


def test_bad_arguments_are_refused_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = files(tmp_path)
    with pytest.raises(TraceError, match="--nodes 3: expected 1..2"):
        draw_nodes(load_nodes(nodes), 3, 1)
    with pytest.raises(TraceError, match="--speedup 0"):
        load_trace(pods, 0)
    args = ["--node-list", str(nodes), "--pods", str(pods), "--nodes", "2"]
    assert main([*args, "--every", "0"]) == 2
    assert "--every and --plans-per-round: expected at least 1" in capsys.readouterr().err
    assert main([*args, "--seeds", "1,x"]) == 2
    assert "defrag_replay:" in capsys.readouterr().err


def test_the_command_prints_both_variants_per_seed_and_writes_a_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = files(tmp_path)
    png = tmp_path / "nodes.png"
    argv = ["--node-list", str(nodes), "--pods", str(pods), "--nodes", "2", "--every", "1"]
    assert main([*argv, "--speedup", "1", "--seeds", "1,2,3", "--png", str(png)]) == 0
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines[2:8]]
    assert [(r[0], r[1]) for r in rows] == [(s, v) for s in "123" for v in ("fgd", "fgd+defrag")]
    assert [r[6] for r in rows] == ["1", "0"] * 3  # pending at the end
