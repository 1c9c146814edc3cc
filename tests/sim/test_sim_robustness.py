"""The robustness runner end to end on a tiny trace directory: the table's figures come
from its own results.csv, the worst ratio is first, every constrained workload is kept per
seed as drawn with that seed, and bad input is one line."""

from __future__ import annotations

import csv
import statistics

import pytest

from hack.sim import constrain, robustness, trace
from tests.sim.simfiles import NODE_HEADER, POD_HEADER, write_csv


@pytest.fixture
def trace_dir(tmp_path):
    d = tmp_path / "trace"
    d.mkdir()
    write_csv(
        d / "openb_node_list_gpu_node.csv",
        NODE_HEADER,
        [
            ("n0", 32000, 131072, 4, "T4"),
            ("n1", 64000, 262144, 4, "V100M16"),
            ("n2", 16000, 65536, 2, "P100"),
        ],
    )
    # 10 GPUs and pods of 0.1 GPU: each GPU pod moves x by one, every x gets events
    gpu = [(f"p{i:02d}", 500 + 700 * (i % 4), 1024, 1, 100, "") for i in range(24)]
    cpu = [(f"c{i}", 6000, 2048, 0, 0, "") for i in range(6)]
    write_csv(d / "openb_pod_list_default.csv", POD_HEADER, gpu + cpu)
    wide = [(f"w{i}", 4000, 1024, 1, 100, "") for i in range(8)]
    write_csv(d / "openb_pod_list_wide.csv", POD_HEADER, wide + gpu)
    return d


def test_the_table_from_its_own_results(trace_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--out", str(out), "--seeds", "1-3", "--jobs", "2", "--trace", str(trace_dir),
            "--families", "uniform,concentrated", "--fractions", "0.25"]  # fmt: skip
    assert robustness.main(argv) == 0, capsys.readouterr().err
    text = (out / "robustness.md").read_text()
    assert f"Command: `python -m hack.sim.robustness {' '.join(argv)}`" in text
    assert (out / "command.txt").read_text().strip().endswith(" ".join(argv))
    with (out / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    lines = [x for x in text.splitlines() if x.startswith("| ") and not x.startswith("| workload")]
    labels = [x.split("|")[1].strip() for x in lines]
    assert sorted(labels) == sorted(
        ["default", "wide", "default, uniform 25 %", "default, concentrated 25 %"]
    )
    ratios = []
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        workload = cells[0]

        def u(policy, x, workload=workload):
            key = (workload, policy, str(x))
            return [
                float(r["unalloc_pct"]) for r in rows if (r["workload"], r["policy"], r["x"]) == key
            ]

        fgd, stowage = u("fgd", 100), u("stowage", 100)
        assert len(fgd) == len(stowage) == 3
        assert cells[1] == f"{statistics.mean(fgd):.2f} ± {statistics.stdev(fgd):.2f}"
        assert cells[2] == f"{statistics.mean(stowage):.2f} ± {statistics.stdev(stowage):.2f}"
        ratio = statistics.mean(stowage) / statistics.mean(fgd)
        assert cells[3] == f"**{ratio:.2f}**"
        assert cells[8] == f"{sum(s <= f for s, f in zip(stowage, fgd, strict=True))}/3"
        limit = float(cells[7].split(" ± ")[0])
        assert limit <= min(statistics.mean(fgd), statistics.mean(stowage)) + 1e-9
        ratios.append(ratio)
    assert ratios == sorted(ratios, reverse=True)  # worst first


def test_each_constrained_workload_is_drawn_with_its_seed(trace_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--out", str(out), "--seeds", "4,5", "--jobs", "1", "--trace", str(trace_dir),
            "--workloads", "default", "--families", "concentrated",
            "--fractions", "0.5"]  # fmt: skip
    assert robustness.main(argv) == 0, capsys.readouterr().err
    pods = trace.load_pods(trace_dir / "openb_pod_list_default.csv")
    nodes = trace.load_nodes(trace_dir / "openb_node_list_gpu_node.csv")
    for seed in (4, 5):
        kept = out / "workloads" / f"default-concentrated-50pct-seed{seed}.csv"
        specs = constrain.choose_specs(pods, nodes, 0.5, seed, family="concentrated")
        again = tmp_path / f"again{seed}.csv"
        constrain.write_constrained(trace_dir / "openb_pod_list_default.csv", again, specs)
        assert kept.read_text() == again.read_text()
        assert sum(1 for p in trace.load_pods(kept) if p.gpu_models) == 12  # half of 24


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (["--families", "nope"], "--families 'nope': known: uniform"),
        (["--workloads", "nope"], "--workloads 'nope': known: default, wide"),
        (["--fractions", "0.2,x"], "--fractions '0.2,x': expected numbers"),
        (["--fractions", "1.5"], "expected fractions in (0, 1]"),
        (["--seeds", "3-1"], "range 3-1 is backwards"),
        (["--policy-arg", "stowage.reserve_gpu_cpu=true"],
         "fgd and stowage must run under the same admission rules (fgd: none; "
         "stowage: reserve-gpu-cpu); use --admission"),
        (["--admission", "nope"], "unknown admission rule 'nope'"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line(trace_dir, tmp_path, capsys, extra, problem):
    out = tmp_path / "out"
    assert robustness.main(["--out", str(out), "--trace", str(trace_dir), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("robustness: error: ")
    assert problem in err
    assert not out.exists()
