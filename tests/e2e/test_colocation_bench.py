"""The colocation latency benchmark runs end to end and leaves nothing behind (opt-in: it
starts a coordinator and an agent of its own)."""

from __future__ import annotations

import json

import pytest

from hack.bench import colocation_latency, colocation_rig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        colocation_rig.unavailable() is not None, reason=str(colocation_rig.unavailable())
    ),
]


def test_one_coordinator_trial_measures_a_latency_and_removes_its_cgroups(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--trials", "1", "--interval", "0.5", "--paths", "coordinator"]
    assert colocation_latency.main(argv) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[0])
    assert result["report_interval_s"] == 0.5
    assert len(result["coordinator"]["onset_to_quota_s"]) == 1
    assert result["coordinator"]["onset_to_quota_s"][0] > 0
    left = [
        p
        for c in colocation_rig.CONTROLLERS
        for p in (colocation_rig.CGROUP_FS / c).glob(f"{colocation_rig.PREFIX}*")
    ]
    assert left == []
