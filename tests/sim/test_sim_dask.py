"""A sweep on Dask distributed gives what a serial run gives: the same rows (every metric of
every run, seeds included) and the same limits, with every pod counted by the progress."""

from __future__ import annotations

import pytest

from hack.sim import main
from hack.sim.main import Run, execute, parse_entries
from tests.clirun import stowage
from tests.sim.simfiles import NODE_HEADER, POD_HEADER, write_csv


@pytest.fixture
def sweep(tmp_path):
    """Two workloads × two policies × three seeds on a small mixed cluster."""
    nodes = write_csv(
        tmp_path / "nodes.csv",
        NODE_HEADER,
        [(f"n{i}", 32000 + 8000 * (i % 3), 262144, (1, 2, 4, 8)[i % 4], "T4") for i in range(12)],
    )
    shapes = [(4000, 1, 500), (8000, 1, 1000), (16000, 2, 1000), (2000, 0, 0), (6000, 1, 250)]
    workloads = {}
    for name, shift in (("alpha", 0), ("beta", 2)):
        rows = [
            (f"p{k}", cpu, 16384, gpus, milli, "")
            for k, (cpu, gpus, milli) in enumerate(shapes[(j + shift) % 5] for j in range(40))
        ]
        workloads[name] = write_csv(tmp_path / f"openb_pod_list_{name}.csv", POD_HEADER, rows)
    entries = parse_entries("fgd,stowage")
    return [
        Run(nodes, path, name, entry, seed)
        for name, path in workloads.items()
        for entry in entries
        for seed in (1, 2, 3)
    ]


def serial(runs):
    """Each call in this process, one after the other."""
    rows = [row for run in runs for row in main.simulate(run)[0]]
    sequences = sorted({(r.nodes, r.pods, r.workload, r.seed) for r in runs}, key=str)
    limits: dict[str, list[float]] = {}
    for nodes, pods, workload, seed in sequences:
        value = main.limit(nodes, pods, seed)
        if value is not None:  # no event at x = 100 in that sequence
            limits.setdefault(workload, []).append(value)
    return rows, limits


def test_a_sweep_on_a_local_cluster_of_two_workers_equals_a_serial_run(sweep):
    rows, limits = serial(sweep)
    outcome = execute(sweep, 2, False, scheduler="local")
    assert sorted(map(repr, outcome.rows)) == sorted(map(repr, rows))
    assert outcome.rows == sorted(
        rows,
        key=lambda r: (r["workload"], ["fgd", "stowage"].index(r["policy"]), r["seed"], r["x"]),
    )
    assert outcome.limits == limits
    assert {r["seed"] for r in outcome.rows} == {1, 2, 3}
    assert outcome.pods == sum(len(main._arrivals(r.nodes, r.pods, r.seed).pods) for r in sweep)
    assert outcome.pods > 0 and set(outcome.speed) == {"fgd", "stowage"}


def test_the_process_pool_equals_the_dask_sweep(sweep):
    on_dask = execute(sweep, 2, False, scheduler="local")
    local = execute(sweep, 2, False)
    assert local.rows == on_dask.rows and local.limits == on_dask.limits
    assert local.pods == on_dask.pods


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("nonsense://x:1", "unknown address scheme 'nonsense'"),
        ("tcp//x", "Must include protocol"),
    ],
)
def test_a_scheduler_address_dask_cannot_dial_is_one_error_line_and_writes_nothing(
    tmp_path, address, problem
):
    out = tmp_path / "out"
    run = stowage("sim", "--policies", "fgd", "--out", str(out), "--scheduler", address)
    assert run.returncode == 2
    assert run.stderr.startswith("stowage sim: error: --scheduler") and problem in run.stderr
    assert run.stderr.count("\n") == 1 and not out.exists()
