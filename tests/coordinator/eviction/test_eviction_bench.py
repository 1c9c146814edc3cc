"""The eviction planning benchmark runs end to end on a small cluster and reports what it
says."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hack.bench import eviction_plan as bench


def test_a_small_run_reports_the_plan_next_to_the_baseline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench.main(["--nodes", "40", "--repeats", "2"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["nodes"] == 40
    assert report["gpu_allocation_pct"] == 95.0
    assert set(report["baseline_filter_ms"]) == set(report["plan_ms"]) == {"median", "max"}
    assert report["plan"]["victims"] >= 1
    assert report["ratio_plan_to_filter"] > 0


def test_no_node_has_room_for_the_pending_pod_before_evictions() -> None:
    cluster = bench.build(40, 95.0, seed=3)
    state = cluster.state
    assert state is not None
    assert int((state.gpu_free > 0).sum(axis=1).max()) < bench.GPUS_PER_NODE
    assert cluster.budgets.synced and len(cluster.budgets.by_key) == 40
