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
from hack.sim import arrivals, trace
from hack.sim.main import Run, execute, parse_entries, parse_entry, parse_seeds
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
    "cpu_alloc_pct",
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
    assert summary.count("| workload | limit | best-fit | fgd |") == 1  # at 100 %
    assert summary.count("| workload | best-fit | fgd |") == 2  # at 130 %, failed pods
    assert "Admission rules in force: best-fit: none; fgd: none" in summary
    tables = re.findall(r"^\| tiny \|.*$", summary, re.M)
    assert len(tables) == 4  # U at 100 %, at 130 %, the ratio, failed pods
    for point, line in zip((100, 130), tables[:2], strict=True):
        assert f"arrived = {point} %" in summary
        cells = [c.strip() for c in line.strip("|").split("|")[1:]]
        if point == 100:
            limit, *cells = cells
            assert float(limit.split(" ± ")[0]) <= min(float(c.split(" ± ")[0]) for c in cells)
        for policy, cell in zip(("best-fit", "fgd"), cells, strict=True):
            mean, sd = (float(v) for v in cell.split(" ± "))
            u = [
                float(r["unalloc_pct"])
                for r in rows
                if (r["policy"], r["x"]) == (policy, str(point))
            ]
            assert mean == pytest.approx(statistics.mean(u), abs=0.006)
            assert sd == pytest.approx(statistics.stdev(u), abs=0.006)
    # The last table: failed CPU-only / GPU pods at the end of the run, mean over seeds.
    cells = [c.strip() for c in tables[3].strip("|").split("|")[1:]]
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
        ("1-99999999999", "at most 10000 seeds"),
        ("1-5000,6001-11001", "at most 10000 seeds"),
    ],
)
def test_parse_seeds_refuses(text, problem):
    with pytest.raises(ConfigError, match=problem):
        parse_seeds(text)


# ------------------------------------------------------------ policy arguments


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("stowage", ("stowage", {}, ())),
        ("stowage:reserve_gpu_cpu=true", ("stowage", {"reserve_gpu_cpu": True}, ())),
        (" fgd : coverage = 0.9 ", ("fgd", {"coverage": 0.9}, ())),
        ("stowage:relearn_max=128:reserve_gpu_cpu=false",
         ("stowage", {"relearn_max": 128, "reserve_gpu_cpu": False}, ())),
        ("fgd+reserve-gpu-cpu", ("fgd", {}, ("reserve-gpu-cpu",))),
        ("fgd + reserve-gpu-cpu:coverage=0.9", ("fgd", {"coverage": 0.9}, ("reserve-gpu-cpu",))),
    ],
)  # fmt: skip
def test_parse_entry(entry, parsed):
    got = parse_entry(entry)
    assert (got.name, dict(got.args), got.admission) == parsed
    assert got.label == entry.strip()


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("stowage:reserve_gpu_cpu", "expected NAME:KEY=VALUE, got 'reserve_gpu_cpu'"),
        ("stowage:=true", "expected NAME:KEY=VALUE"),
        ("stowage:reserve_gpu_cpu=", "expected NAME:KEY=VALUE"),
        ("stowage:coverage=0.9:coverage=0.8", "argument 'coverage' is given twice"),
        ("stowage:coverage=[0.9", "coverage: not a YAML value"),
        ("fgd+", "expected NAME[+RULE…][:KEY=VALUE…]"),
        ("+reserve-gpu-cpu", "expected NAME[+RULE…][:KEY=VALUE…]"),
    ],
)
def test_parse_entry_refuses(entry, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)):
        parse_entry(entry)


def test_policy_args_go_to_every_entry_of_their_policy():
    entries = parse_entries(
        "fgd,stowage,stowage:coverage=0.9,fgd+reserve-gpu-cpu",
        ["stowage.reserve_gpu_cpu=false", "fgd.coverage=0.8"],
        ["reserve-gpu-cpu"],
    )
    assert [(e.label, dict(e.args), e.admission) for e in entries] == [
        ("fgd", {"coverage": 0.8}, ("reserve-gpu-cpu",)),
        ("stowage", {"reserve_gpu_cpu": False}, ("reserve-gpu-cpu",)),
        ("stowage:coverage=0.9", {"coverage": 0.9, "reserve_gpu_cpu": False}, ("reserve-gpu-cpu",)),
        ("fgd+reserve-gpu-cpu", {"coverage": 0.8}, ("reserve-gpu-cpu",)),
    ]


@pytest.mark.parametrize(
    ("policies", "policy_args", "rules", "problem"),
    [
        ("stowage:reserve_gpu_cpu=true", ["stowage.reserve_gpu_cpu=false"], [],
         "--policy-arg stowage.reserve_gpu_cpu: the entry 'stowage:reserve_gpu_cpu=true' "
         "sets reserve_gpu_cpu itself"),
        ("fgd", ["stowage.reserve_gpu_cpu=false"], [],
         "--policy-arg stowage.…: no --policies entry is 'stowage'"),
        ("fgd", ["fgd.coverage"], [], "--policy-arg 'fgd.coverage': expected POLICY.KEY=VALUE"),
        ("fgd", ["coverage=0.9"], [], "expected POLICY.KEY=VALUE"),
        ("fgd", ["fgd.coverage=0.9", "fgd.coverage=0.8"], [], "fgd.coverage is given twice"),
        ("fgd", ["fgd.coverage=2"], [], "fgd.coverage: expected a fraction in (0, 1]"),
        ("fgd", ["fgd.nope=1"], [], "fgd.nope: unknown setting"),
        ("fgd", [], ["nope"], "unknown admission rule 'nope'; known: reserve-gpu-cpu"),
        ("fgd+nope", [], [], "unknown admission rule 'nope'"),
    ],
)  # fmt: skip
def test_parse_entries_refuses(policies, policy_args, rules, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)):
        parse_entries(policies, policy_args, rules)


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


# ------------------------------------------------------------------- progress


def pods_replayed(nodes: Path, pods: Path, seeds) -> int:
    """Arrivals per seed, from the arrival builder itself (not the progress code)."""
    workload, cluster = trace.load_pods(pods), trace.load_nodes(nodes)
    return sum(len(arrivals.build(workload, cluster, s).pods) for s in seeds)


def test_the_progress_counter_reaches_every_pod_replayed(files):
    nodes, pods, _ = files
    entries = [parse_entry("fgd"), parse_entry("stowage+reserve-gpu-cpu")]
    runs = [Run(nodes, pods, "tiny", e, s) for e in entries for s in (1, 2)]
    outcome = execute(runs, 2, show=False, limits=False)
    assert outcome.pods == 2 * pods_replayed(nodes, pods, (1, 2))
    assert outcome.limits == {}


def test_one_bar_for_a_single_run_when_asked_and_none_otherwise(files):
    nodes, pods, out = files
    total = pods_replayed(nodes, pods, (3,))
    common = ["--nodes", nodes, "--pods", pods, "--policies", "stowage", "--seeds", "3",
              "--jobs", "1", "--no-plot", "--no-limit"]  # fmt: skip
    shown = stowage(*common, "--out", out, "--progress")
    assert shown.returncode == 0, shown.stderr
    assert f"{total}/{total}" in shown.stderr and "pod" in shown.stderr
    quiet = stowage(*common, "--out", out)  # stderr is a pipe here, not a terminal
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""


# ------------------------------------------------------------------ admission


def test_an_admission_rule_for_every_policy_makes_ratios_comparable(files):
    """The tight T4 cluster of the test above: fgd with the rule refuses the CPU-only pods
    as stowage with it does; a ratio between a side with the rule and one without is not
    printed."""
    nodes, pods, out = files
    result = stowage(
        "--nodes", nodes, "--pods", pods, "--policies", "fgd,stowage,stowage+reserve-gpu-cpu",
        "--seeds", "1", "--out", out, "--jobs", "1", "--no-plot", "--no-limit",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = (out / "summary.md").read_text()
    assert "fgd: none; stowage: none; stowage+reserve-gpu-cpu: reserve-gpu-cpu" in summary
    assert "| workload | fgd | stowage | stowage+reserve-gpu-cpu |" in summary  # --no-limit
    assert "limit" not in summary
    rows = {
        line.split("|")[2].strip(): line
        for line in summary.splitlines()
        if line.startswith("| tiny | stowage")
    }
    assert "| fgd | none |" in rows["stowage"]
    assert "not comparable (reserve-gpu-cpu vs fgd: none)" in rows["stowage+reserve-gpu-cpu"]
    everyone = stowage(
        "--nodes", nodes, "--pods", pods, "--policies", "fgd,stowage+reserve-gpu-cpu",
        "--admission", "reserve-gpu-cpu", "--seeds", "1", "--out", out, "--jobs", "1",
        "--no-plot", "--no-limit",
    )  # fmt: skip
    assert everyone.returncode == 0, everyone.stderr
    summary = (out / "summary.md").read_text()
    line = next(x for x in summary.splitlines() if x.startswith("| tiny | stowage"))
    assert "| fgd | reserve-gpu-cpu |" in line
    assert "not comparable" not in line


def test_fgd_with_the_rule_refuses_cpu_only_pods_like_stowage_with_its_argument(tmp_path, capsys):
    nodes = write_csv(tmp_path / "nodes.csv", NODE_HEADER, [("n0", 40000, 65536, 4, "T4")])
    gpu = [(f"g{i}", 100, 1024, 1, 1000, "V100M16") for i in range(4)]
    cpu = [(f"c{i}", 1000, 1024, 0, 0, "") for i in range(3)]
    pods = write_csv(tmp_path / "openb_pod_list_tight.csv", POD_HEADER, gpu + cpu)
    out = tmp_path / "out"
    args = build_parser().parse_args(
        ["sim", "--nodes", str(nodes), "--pods", str(pods), "--policies", "fgd,stowage",
         "--policy-arg", "stowage.reserve_gpu_cpu=true", "--admission", "reserve-gpu-cpu",
         "--seeds", "1", "--out", str(out), "--jobs", "1", "--no-plot"]
    )  # fmt: skip
    assert args.run(args) == 0, capsys.readouterr().err
    with (out / "results.csv").open(newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["x"]))
    last = {r["policy"]: r for r in rows}
    assert int(last["fgd"]["failed_cpu"]) >= 3
    assert last["fgd"]["failed_cpu"] == last["stowage"]["failed_cpu"]
    assert (
        "Given to every entry of their policy: stowage.reserve_gpu_cpu=true"
        in (out / "summary.md").read_text()
    )
