"""The scheduling benchmark (``hack/bench/scheduling.py``) at its small size: 100 openb
nodes, 200 pods, the real kube-scheduler without and with Stowage.

What is checked is that the benchmark measures what it says: both runs placed the pods
from the scheduler's own Events, the Stowage run called the coordinator for them (one
filter at least per pod it placed), every report the coordinator got was taken, and the
figures are there. Its speed is printed, never asserted (the 500- and 5,000-node figures
go in the README).
"""

from __future__ import annotations

import json

from hack.bench.scheduling import POOL, measure
from tests.realcluster import kit

OWNER = "test-bench"
NODES = 100
PODS = 200


def test_the_benchmark_measures_both_schedulers(cluster: kit.Cluster) -> None:
    try:
        result = measure(cluster.plane, NODES, PODS, seed=7, labels={**POOL, kit.OWNER: OWNER})
    finally:
        cluster.delete_owned(OWNER)
    print(json.dumps(result))
    assert result["nodes"] == NODES and result["pods"] == PODS
    assert result["reports_sent"] >= NODES and result["reports_refused"] == 0
    plain, stowage = result["plain"], result["stowage"]
    for run in (plain, stowage):
        assert run["bound"] + run["pending"] == PODS
        assert run["bound"] > PODS // 2
        assert run["pods_per_s"] > 0 and run["attempt_ms"] > 0
    assert plain["verbs_ms"] == {}
    calls, mean_ms = stowage["verbs_ms"]["filter"]
    assert calls >= stowage["bound"] and mean_ms > 0
    # The trace's job pods ask for no soft placement: the filter picks, no prioritize follows
    # but where kube-scheduler gave up on the filter call (past httpTimeout, by its log).
    assert plain["filters_given_up"] == 0
    prioritized, _ = stowage["verbs_ms"].get("prioritize", (0, 0.0))
    assert prioritized <= stowage["filters_given_up"], stowage
    assert result["ratio"] == round(stowage["pods_per_s"] / plain["pods_per_s"], 3)
