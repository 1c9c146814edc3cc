"""The prioritize benchmark runs end to end on a small cluster and reports what it says."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coordinator.state.kubeobjects import node_spec, pod_request
from hack.bench import prioritize as bench


def test_the_cluster_mixes_gpu_and_cpu_nodes_and_the_pods_every_shape():
    kinds = bench.node_kinds(400, seed=1)
    specs = [node_spec(bench.node_json(name, kind)) for name, kind in kinds]
    assert {s.gpus for s in specs} == {0, 2, 4, 8}
    assert len({s.gpu_model for s in specs if s.gpus}) >= 4
    assert len({name for name, _ in kinds}) == 400
    requests = {shape.name: pod_request(p, 0) for shape, p in bench.pending_pods(200, seed=1)}
    assert set(requests) == {shape.name for shape in bench.POD_SHAPES}
    assert requests["shared-500"].sharing and requests["shared-500"].gpu_milli == 500
    assert requests["8-gpu"].gpus == 8
    assert not requests["cpu"].gpus and requests["cpu-batch"].batch
    assert requests["2-gpu-a100|h100"].gpu_models == {bench.A100, bench.H100}


@pytest.mark.parametrize(("values", "p", "want"), [([3.0], 99, 3.0), ([1, 2, 3, 4], 50, 2)])
def test_percentiles_are_nearest_rank(values: list[float], p: float, want: float):
    assert bench.pct(values, p) == want


def test_a_small_run_reports_every_verb_and_phase(capsys: pytest.CaptureFixture[str]):
    assert bench.main(["--nodes", "60", "--requests", "10", "--bound-pods", "40"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (result,) = report["results"]
    assert result["nodes"] == 60
    for verb in ("filter", "prioritize"):
        assert result[verb]["first"]["count"] == 1
        assert result[verb]["cold"]["count"] + result[verb]["warm"]["count"] == 10
        assert result[verb]["all"]["count"] == 10
        for phase in ("first", "cold"):
            summary = result[verb][phase]
            for figure in (
                "e2e_p50_ms",
                "server_p50_ms",
                "server_wall_p50_ms",
                "floor_p50_ms",
                "msgspec_floor_p50_ms",
            ):
                assert summary[figure] > 0, (verb, phase, figure)
    assert result["distinct_nodes_chosen"] >= 1
    assert report["targets"] == {}  # no 5,000-node run
