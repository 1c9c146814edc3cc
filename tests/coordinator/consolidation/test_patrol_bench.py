"""The patrol sampling benchmark runs end to end on a small cluster and says what it
measured, the baseline next to the cost."""

from __future__ import annotations

import re

import pytest

from hack.bench import patrol_sample as bench


def test_a_small_run_prints_the_baseline_next_to_the_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench.main(["--nodes", "20", "--pods-per-node", "3", "--repeats", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "20 nodes, 60 bound pods: Patrol.sample, median of 2"
    labels = [re.fullmatch(r"  (baseline|with cost) +\d+\.\d ms", line) for line in lines[1:5]]
    assert [m.group(1) if m else None for m in labels] == ["baseline", "with cost"] * 2
    # Pod n (0-59) is in namespace n % 50, in its PodGroup's queue q-(n % 50 % 7) when
    # n % 3 == 1: all 7 queues, and every namespace but the 14 of 10-49 that are 1 modulo
    # 3 (their only pod is in a PodGroup): 7 + 36.
    assert lines[5] == "  queues costed: 43"
