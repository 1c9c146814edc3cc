"""The largest-report benchmark runs end to end and reports every verb for both reports."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hack.bench import largest_report as bench


def test_one_repeat_reports_each_verb_for_both_reports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench.main(["--repeats", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    report: dict[str, Any] = json.loads(lines[-1])
    assert report["repeats"] == 1
    assert report["report_bytes"]["largest"] > 10 * bench.MIB > report["report_bytes"]["ordinary"]
    verbs = [call.verb for call in bench.calls(bench.LARGEST, b"")]
    assert list(report["median_ms"]) == verbs
    for verb in verbs:
        assert set(report["median_ms"][verb]) == {"largest", "ordinary"}
        assert all(ms > 0 for ms in report["median_ms"][verb].values())
        assert any(line.startswith(verb) for line in lines), verb


def test_repeats_below_one_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--repeats", "0"])
    assert exit_.value.code == 2
    assert "--repeats: at least 1" in capsys.readouterr().err
