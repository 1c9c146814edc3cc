"""The hostile-load memory benchmark runs end to end and shows the cluster holding only
what the watch gave it: phantom Nodes offered by scheduler calls are not stored, and no
pod is assumed on them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hack.bench import hostile_memory


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert hostile_memory.main(list(argv)) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return report


def test_a_small_run_holds_no_phantom_node_and_assumes_nothing_on_them(
    capsys: pytest.CaptureFixture[str],
):
    report = run(capsys, "--nodes", "20", "--requests", "5", "--phantoms", "10")
    samples = report["samples"]
    assert [s["nodes"] for s in samples.values()] == [20, 20, 20]
    assert samples["after_baseline"]["assumed"] == 5  # one per ordinary prioritize
    assert samples["after_hostile"]["assumed"] == 5  # none on a phantom node
    assert report["statuses"] == {"baseline": {"200": 10}, "hostile": {"200": 10}}
    assert report["phantom_nodes_offered"] == 50
    for sample in samples.values():
        assert sample["rss_mib"] > 0
        assert sample["peak_rss_mib"] >= sample["rss_mib"]


@pytest.mark.slow
def test_hostile_load_grows_memory_no_more_than_ordinary_load(
    capsys: pytest.CaptureFixture[str],
):
    """200,000 phantom Nodes offered over 2,000 calls: the coordinator grows by no more than
    over 2,000 ordinary calls, plus 32 MiB of allocator noise (storing the phantoms took
    hundreds of MiB)."""
    report = run(capsys, "--nodes", "500", "--requests", "2000", "--phantoms", "100")
    assert report["samples"]["after_hostile"]["nodes"] == 500
    assert report["hostile_growth_mib"] <= max(report["baseline_growth_mib"], 0) + 32
