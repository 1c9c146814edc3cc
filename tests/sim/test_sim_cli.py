"""``stowage sim`` end to end, as a separate process on a tiny cluster and pod list."""

from __future__ import annotations

import csv
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import build_parser
from common.errors import ConfigError
from hack.sim.main import parse_policy, parse_seeds
from tests.sim.simfiles import NODE_HEADER, POD_HEADER, REPO, write_csv

# benchmark protocol §5.5
COLUMNS = [
    "workload",
    "policy",
    "seed",
    "x",
    "alloc_pct",
    "unalloc_pct",
    "frag_amount_pct",
    "frag_ratio_pct",
    "n_events",
    "failed_cpu",
    "failed_share",
    "failed_1gpu",
    "failed_multi",
]


def stowage(*args: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "sim", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )


@pytest.fixture
def files(tmp_path):
    """10 GPUs (1 % = 100 milli) and pods of 100 milli-GPU: every GPU arrival moves the
    arrived workload by exactly 1 %, so every x from 0 to 130 gets a row."""
    nodes = write_csv(
        tmp_path / "nodes.csv",
        NODE_HEADER,
        [
            ("n0", 32000, 131072, 4, "T4"),
            ("n1", 64000, 262144, 4, "V100M16"),
            ("n2", 16000, 65536, 2, "P100"),
        ],
    )
    gpu = [(f"p{i:02d}", 500 + 100 * (i % 3), 1024, 1, 100, "") for i in range(20)]
    cpu = [(f"c{i}", 2000, 2048, 0, 0, "") for i in range(5)]
    pods = write_csv(tmp_path / "openb_pod_list_tiny.csv", POD_HEADER, gpu + cpu)
    return nodes, pods, tmp_path / "out"


def test_two_policies_two_seeds(files):
    nodes, pods, out = files
    result = stowage(
        "--nodes", nodes, "--pods", pods, "--policies", "best-fit,fgd", "--seeds", "1-2",
        "--out", out, "--jobs", "1", "--no-plot",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    with (out / "results.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS
        rows = list(reader)
    keys = [(r["workload"], r["policy"], r["seed"], r["x"]) for r in rows]
    assert len(keys) == len(set(keys)) == 2 * 2 * 131
    assert set(keys) == {
        ("tiny", p, s, str(x)) for p in ("best-fit", "fgd") for s in ("1", "2") for x in range(131)
    }
    for r in rows:
        assert float(r["alloc_pct"]) + float(r["unalloc_pct"]) == pytest.approx(100, abs=2e-4)
        assert int(r["n_events"]) >= 1
    assert not (out / "unallocated.png").exists()

    summary = (out / "summary.md").read_text()
    assert summary in result.stdout
    assert summary.count("| workload | best-fit | fgd |") == 3
    tables = re.findall(r"^\| tiny \|.*$", summary, re.M)
    for point, line in zip((100, 130), tables[:2], strict=True):
        assert f"arrived = {point} %" in summary
        cells = [c.strip() for c in line.strip("|").split("|")[1:]]
        for policy, cell in zip(("best-fit", "fgd"), cells, strict=True):
            mean, sd = (float(v) for v in cell.split(" ± "))
            u = [
                float(r["unalloc_pct"])
                for r in rows
                if (r["policy"], r["x"]) == (policy, str(point))
            ]
            assert mean == pytest.approx(statistics.mean(u), abs=0.006)
            assert sd == pytest.approx(statistics.stdev(u), abs=0.006)
    # The third table: failed CPU-only / GPU pods at the end of the run, mean over seeds.
    cells = [c.strip() for c in tables[2].strip("|").split("|")[1:]]
    for policy, cell in zip(("best-fit", "fgd"), cells, strict=True):
        last = [r for r in rows if (r["policy"], r["x"]) == (policy, "130")]
        gpu = [sum(int(r[f"failed_{c}"]) for c in ("share", "1gpu", "multi")) for r in last]
        cpu = [int(r["failed_cpu"]) for r in last]
        assert cell == f"{statistics.mean(cpu):.0f} / {statistics.mean(gpu):.0f}"


def test_the_plot_is_a_png(files):
    nodes, pods, out = files
    result = stowage(
        "--nodes", nodes, "--pods", pods, "--policies", "best-fit", "--seeds", "3",
        "--out", out, "--jobs", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (out / "unallocated.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _missing_column(tmp: Path, nodes: Path, pods: Path) -> tuple[list[object], str]:
    bad = write_csv(tmp / "nomilli.csv", POD_HEADER[:4], [("p0", 1000, 1, 0)])
    return ["--pods", bad], f"{bad}: missing column(s) gpu_milli"


def _empty_pods(tmp: Path, nodes: Path, pods: Path) -> tuple[list[object], str]:
    empty = write_csv(tmp / "empty.csv", POD_HEADER, [])
    return ["--pods", empty], f"{empty}: no rows"


def _unknown_policy(tmp, nodes, pods):
    return ["--pods", pods, "--policies", "best-fit,nope"], "unknown policy 'nope'"


def _bad_seeds(tmp, nodes, pods):
    return ["--pods", pods, "--seeds", "4x"], "--seeds '4x': expected numbers and ranges"


def _no_nodes_file(tmp, nodes, pods):
    return ["--pods", pods, "--nodes", tmp / "gone.csv"], f"{tmp / 'gone.csv'}: No such file"


def _no_pods_file(tmp, nodes, pods):
    return ["--pods", tmp / "gone.csv"], f"{tmp / 'gone.csv'}: No such file"


def _cpu_only_nodes(tmp, nodes, pods):
    cpu = write_csv(tmp / "cpu.csv", NODE_HEADER, [("n0", 32000, 1024, 0, "")])
    return ["--pods", pods, "--nodes", cpu], f"{cpu}: no node has a GPU"


def _policy_twice(tmp, nodes, pods):
    return ["--pods", pods, "--policies", "fgd,best-fit,fgd"], "a policy is listed twice"


def _unknown_policy_argument(tmp, nodes, pods):
    return ["--pods", pods, "--policies", "fgd,stowage:nope=1"], "stowage.nope: unknown setting"


def _policy_argument_of_the_wrong_type(tmp, nodes, pods):
    entry = "stowage:reserve_gpu_cpu=maybe"
    return ["--pods", pods, "--policies", entry], "stowage.reserve_gpu_cpu: expected bool"


def bad_run_args(files, case) -> tuple[list[str], str]:
    nodes, pods, out = files
    extra, expected = case(out.parent, nodes, pods)
    args = {"--nodes": nodes, "--policies": "best-fit,fgd", "--seeds": "1", "--out": out}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        args[flag] = value
    return [str(v) for kv in args.items() for v in kv] + ["--jobs", "1", "--no-plot"], expected


@pytest.mark.parametrize(
    "case", [_missing_column, _empty_pods, _unknown_policy, _bad_seeds, _no_nodes_file]
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(files, case):
    argv, expected = bad_run_args(files, case)
    result = stowage(*argv)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("stowage sim: error: ")
    assert expected in lines[0]
    assert result.stdout == ""
    assert not files[2].exists()


@pytest.mark.parametrize(
    "case",
    [
        _no_pods_file,
        _cpu_only_nodes,
        _policy_twice,
        _unknown_policy_argument,
        _policy_argument_of_the_wrong_type,
    ],
)
def test_more_bad_input_in_process(files, case, capsys):
    """The same checks without a process start each (the subprocess cases show that
    nothing else reaches stderr)."""
    argv, expected = bad_run_args(files, case)
    args = build_parser().parse_args(["sim", *argv])
    assert args.run(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("stowage sim: error: ")
    assert expected in captured.err
    assert not files[2].exists()


# ---------------------------------------------------------------------- seeds


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("42-44", [42, 43, 44]), ("42,43,50", [42, 43, 50]), (" 7 , 1-2", [7, 1, 2]), ("0", [0])],
)
def test_parse_seeds(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "expected numbers"),
        ("4x", "expected numbers"),
        ("-3", "expected numbers"),
        ("1-", "expected numbers"),
        ("1,,2", "expected numbers"),
        ("²", "expected numbers"),
        ("5-3", "range 5-3 is backwards"),
        ("1-3,3", "a seed is listed twice"),
    ],
)
def test_parse_seeds_refuses(text, problem):
    with pytest.raises(ConfigError, match=problem):
        parse_seeds(text)


# ------------------------------------------------------------ policy arguments


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("stowage", ("stowage", {})),
        ("stowage:reserve_gpu_cpu=true", ("stowage", {"reserve_gpu_cpu": True})),
        (" fgd : coverage = 0.9 ", ("fgd", {"coverage": 0.9})),
        ("stowage:relearn_max=128:reserve_gpu_cpu=false",
         ("stowage", {"relearn_max": 128, "reserve_gpu_cpu": False})),
    ],
)  # fmt: skip
def test_parse_policy(entry, parsed):
    assert parse_policy(entry) == parsed


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("stowage:reserve_gpu_cpu", "expected NAME:KEY=VALUE, got 'reserve_gpu_cpu'"),
        ("stowage:=true", "expected NAME:KEY=VALUE"),
        ("stowage:reserve_gpu_cpu=", "expected NAME:KEY=VALUE"),
        ("stowage:coverage=0.9:coverage=0.8", "argument 'coverage' is given twice"),
        ("stowage:coverage=[0.9", "coverage: not a YAML value"),
    ],
)
def test_parse_policy_refuses(entry, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)):
        parse_policy(entry)


def test_one_run_reports_a_policy_under_both_arguments(tmp_path, capsys):
    """A T4 node that V100 pods cannot use keeps its 4 GPUs whole and free, and they need
    4 × 11 600 m CPU (the prior ρ) — more than its 40 000 m. Reserving that CPU refuses
    every CPU-only pod; the default places them all (a handful of 1 000 m pods fit)."""
    nodes = write_csv(tmp_path / "nodes.csv", NODE_HEADER, [("n0", 40000, 65536, 4, "T4")])
    gpu = [(f"g{i}", 100, 1024, 1, 1000, "V100M16") for i in range(4)]
    cpu = [(f"c{i}", 1000, 1024, 0, 0, "") for i in range(3)]
    pods = write_csv(tmp_path / "openb_pod_list_tight.csv", POD_HEADER, gpu + cpu)
    out = tmp_path / "out"
    entries = ("stowage", "stowage:reserve_gpu_cpu=true")
    args = build_parser().parse_args(
        ["sim", "--nodes", str(nodes), "--pods", str(pods), "--policies", ",".join(entries),
         "--seeds", "1", "--out", str(out), "--jobs", "1", "--no-plot"]
    )  # fmt: skip
    assert args.run(args) == 0, capsys.readouterr().err
    with (out / "results.csv").open(newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["x"]))
    last = {r["policy"]: r for r in rows}  # each policy's row at the end of the run
    assert set(last) == set(entries)
    assert last["stowage"]["failed_cpu"] == "0"
    # The three listed CPU-only pods always arrive (clones may add more).
    assert int(last["stowage:reserve_gpu_cpu=true"]["failed_cpu"]) >= 3
