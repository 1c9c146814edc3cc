"""The ingest benchmark runs end to end on a few nodes and reports the median round."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hack.bench import ingest as bench


def test_the_median_round_is_reported_with_every_rounds_rate() -> None:
    rounds = [
        {"server_cpu_us_per_answer": 400.0, "one_core_reports_per_s": 2500},
        {"server_cpu_us_per_answer": 250.0, "one_core_reports_per_s": 4000},
        {"server_cpu_us_per_answer": 300.0, "one_core_reports_per_s": 3333},
    ]
    chosen = bench.median_run(rounds)
    assert chosen["server_cpu_us_per_answer"] == 300.0
    assert chosen["one_core_by_round"] == [2500, 4000, 3333]
    assert bench.median_run(rounds[:2])["server_cpu_us_per_answer"] == 250.0


def test_a_small_run_reports_every_phase(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--nodes", "40", "--seconds", "0.5", "--warmup", "0.2", "--concurrency", "4"]
    assert bench.main([*argv, "--rounds", "1"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[0])
    assert report["rounds"] == 1
    for phase in bench.PHASES:
        run = report[phase]
        assert run["errors"] == {}
        assert set(run["statuses"]) == {"200"}
        assert run["answers"] > 0
        assert run["server_cpu_us_per_answer"] > 0
        assert run["one_core_by_round"] == [run["one_core_reports_per_s"]]
