"""One run's per-event metrics and their binning by arrived workload, on hand-made cases
whose every number is worked out in the comments."""

from __future__ import annotations

import numpy as np
import pytest

from coordinator.scoring import registry
from coordinator.scoring.fragmentation import Fragmentation, Shape
from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim import replay
from hack.sim.arrivals import Arrivals
from hack.sim.replay import Events

# --------------------------------------------------------------------- binned


def hand_events() -> Events:
    """Seven events on a 1-GPU cluster (1000 milli, so 10 milli = 1 % arrived).

    arrived 0, 5, 15, 25, 35, 35, 60 → x = 0, 0 (0.5 → even 0), 2 (1.5 → 2), 2 (2.5 → even 2),
    4 (3.5 → 4), 4, 6; nothing lands on x = 1, 3, 5, 7.
    """
    used = np.array([0, 5, 15, 15, 15, 15, 40])
    return Events(
        arrived=np.array([0, 5, 15, 25, 35, 35, 60]),
        used=used,
        idle=1000 - used,
        frag=np.array([100.0, 100.0, 50.0, 50.0, 40.0, 40.0, 30.0]),
        failed=[None, None, None, "share", "multi", "cpu", None],
        cpu_used=np.array([0, 100, 200, 200, 200, 300, 400]),
        cpu_total=1000,
    )


# Per event: alloc = used/10; frag amount = frag/10; frag ratio = 100·frag/idle =
# 10, 10.0502513, 5.0761421, 5.0761421, 4.0609137, 4.0609137, 3.125.
EXPECTED = {
    # x: (alloc mean, frag amount mean, frag ratio mean, events, (cpu, share, 1gpu, multi))
    0: (0.25, 10.0, 10.0251256, 2, (0, 0, 0, 0)),  # events 0, 1
    1: (0.875, 7.5, 7.5506339, 4, (0, 1, 0, 0)),  # none at 1: x 0 and 2, events 0-3
    2: (1.5, 5.0, 5.0761421, 2, (0, 1, 0, 0)),  # events 2, 3
    3: (1.5, 4.5, 4.5685279, 4, (1, 1, 0, 1)),  # none at 3: events 2-5
    4: (1.5, 4.0, 4.0609137, 2, (1, 1, 0, 1)),  # events 4, 5
    5: (2.3333333, 3.6666667, 3.7489425, 3, (1, 1, 0, 1)),  # none at 5: events 4-6
    6: (4.0, 3.0, 3.125, 1, (1, 1, 0, 1)),  # event 6
    7: (4.0, 3.0, 3.125, 1, (1, 1, 0, 1)),  # none at 7 or 8: event 6 (x = 6)
}


# CPU allocated per event: 0, 10, 20, 20, 20, 30, 40 % of 1 000 m, averaged as above.
CPU_EXPECTED = {0: 5.0, 1: 12.5, 2: 20.0, 3: 22.5, 4: 25.0, 5: 30.0, 6: 40.0, 7: 40.0}


def test_binned_rows_match_the_hand_computation():
    rows = replay.binned(hand_events(), 1000)
    assert [r["x"] for r in rows] == list(EXPECTED)  # x = 8 … 130: no event within ±1
    for row in rows:
        alloc, amount, ratio, n, failed = EXPECTED[row["x"]]
        assert row["alloc_pct"] == pytest.approx(alloc, abs=1e-6)
        assert row["unalloc_pct"] == pytest.approx(100 - alloc, abs=1e-6)
        assert row["frag_amount_pct"] == pytest.approx(amount, abs=1e-6)
        assert row["frag_ratio_pct"] == pytest.approx(ratio, abs=1e-6)
        assert row["n_events"] == n
        assert row["cpu_alloc_pct"] == pytest.approx(CPU_EXPECTED[row["x"]], abs=1e-6)
        got = tuple(row[f"failed_{c}"] for c in ("cpu", "share", "1gpu", "multi"))
        assert got == failed, row["x"]


def test_x_rounds_half_to_even_on_the_papers_cluster():
    # 1 % of 6212 GPUs is 62,120 milli; arrived k·62120 + 31060 is exactly k + 0.5 %
    total = 6_212_000
    arrived = np.array([31_060, 93_180, 155_300, 217_420, 217_421])  # 0.5, 1.5, 2.5, 3.5, 3.5+
    used = np.zeros(5, dtype=np.int64)
    events = Events(arrived, used, total - used, np.zeros(5), [None] * 5, used, 1)
    rows = {r["x"]: r["n_events"] for r in replay.binned(events, total)}
    # x = 0, 2, 2, 4, 4; x = 1 and 3 fall back to their neighbours, 5 to x = 4
    assert rows == {0: 1, 1: 3, 2: 2, 3: 4, 4: 2, 5: 2}


def test_frag_ratio_of_a_full_cluster_is_zero():
    used = np.array([1000, 2000])
    events = Events(
        np.array([1000, 2000]), used, np.array([1000, 0]), np.zeros(2), [None] * 2, used, 1
    )
    rows = replay.binned(events, 2000)
    assert {r["x"]: r["frag_ratio_pct"] for r in rows} == {
        49: 0.0,
        50: 0.0,
        51: 0.0,
        99: 0.0,
        100: 0.0,
        101: 0.0,
    }
    assert {r["x"]: r["alloc_pct"] for r in rows}[100] == 100.0


def test_no_events_no_rows():
    empty = np.zeros(0, dtype=np.int64)
    assert replay.binned(Events(empty, empty, empty, np.zeros(0), [], empty, 1), 1000) == []


@pytest.mark.parametrize(
    ("pod", "cls"),
    [
        (PodRequest("c", 1, 0), "cpu"),
        (PodRequest("s", 1, 0, 1, 999), "share"),
        (PodRequest("w", 1, 0, 1, 1000), "1gpu"),
        (PodRequest("m", 1, 0, 2, 1000), "multi"),
        (PodRequest("m", 1, 0, 2, 500), "multi"),
    ],
)
def test_fail_classes(pod, cls):
    assert replay.fail_class(pod) == cls


# ------------------------------------------------------------------------ run


def test_run_records_every_event_by_hand():
    """Best-fit on two nodes; fragmentation with one shape (1 CPU core, 500 milli, 1 GPU).

    n0: 4 cores, 1 GPU; n1: 8 cores, 2 GPUs; 3000 milli in all. A node's fragment is its
    idle GPU if the shape cannot run there, else the idle GPU on devices below 500.
    """
    nodes = [NodeSpec("n0", 4000, 2**30, 1, "T4"), NodeSpec("n1", 8000, 2**30, 2, "T4")]
    pods = [
        # best-fit n0: 100·(1 − [½·3000/128000 + ½·500/8000]) = 95.7 → 95; n1: 87.9 → 87
        PodRequest("p0", 1000, 0, 1, 500),  # → n0 (500); frag 0
        PodRequest("p1", 1000, 0, 1, 600),  # n0 too small → n1 dev 0 (400, 1000); frag 400
        PodRequest("p2", 1000, 0, 2, 1000),  # one whole GPU left anywhere → failed, multi
        # CPU-only: n0 96.875 → 96, n1 89.7 → 89 → n0, now 0 CPU left: its 500 all fragment
        PodRequest("p3", 3000, 0),  # frag 500 + 400
        PodRequest("p4", 1000, 0, 1, 300),  # n1, best-fit device 0 (400 → 100); frag 500+100
        PodRequest("p5", 500, 0, 1, 1000),  # n1 dev 1 (100, 0): no 500 left, frag 500+100
        PodRequest("p6", 100, 0, 1, 200),  # nowhere (n0 no CPU, n1 100 max) → share
        PodRequest("p7", 9000, 0),  # nowhere → cpu
        PodRequest("p8", 100, 0, 1, 1000),  # nowhere → 1gpu
    ]
    measure = Fragmentation([(Shape(1000, 500, 1), 1.0)])
    events = replay.run(
        nodes,
        Arrivals(pods, np.array([0, 1])),
        registry.build_policy("best-fit"),
        measure,
        keep_placements=True,
    )
    assert events.arrived.tolist() == [500, 1100, 3100, 3100, 3400, 4400, 4600, 4600, 5600]
    assert events.used.tolist() == [500, 1100, 1100, 1100, 1400, 2400, 2400, 2400, 2400]
    assert events.idle.tolist() == [2500, 1900, 1900, 1900, 1600, 600, 600, 600, 600]
    assert events.frag.tolist() == [0, 400, 400, 900, 600, 600, 600, 600, 600]
    assert events.failed == [None, None, "multi", None, None, None, "share", "cpu", "1gpu"]
    cpu = [1000, 2000, 2000, 5000, 6000, 6500, 6500, 6500, 6500]  # placed pods' CPU so far
    assert events.cpu_used.tolist() == cpu
    assert events.cpu_total == 12_000
    placed = [(p.node, p.devices) if p else None for p in events.placements]
    assert placed == [(0, (0,)), (1, (0,)), None, (0, ()), (1, (0,)), (1, (1,)), None, None, None]


def test_placements_are_kept_only_on_request():
    nodes = [NodeSpec("n0", 4000, 2**30, 1, "T4")]
    arrivals = Arrivals([PodRequest("p0", 1000, 0, 1, 500)], np.array([0]))
    measure = Fragmentation([(Shape(1000, 500, 1), 1.0)])
    events = replay.run(nodes, arrivals, registry.build_policy("best-fit"), measure)
    assert events.placements == []
    assert events.used.tolist() == [500]


def test_fragmentation_counts_a_node_of_a_model_the_shape_refuses():
    # shape accepts only A: the B node's 2000 idle milli are all fragment, the A node's none
    nodes = [NodeSpec("a", 8000, 2**30, 1, "A"), NodeSpec("b", 8000, 2**30, 2, "B")]
    measure = Fragmentation([(Shape(1000, 500, 1, ("A",)), 1.0)])
    pods = [PodRequest("p0", 1000, 0, 1, 700, frozenset({"B"}))]
    events = replay.run(
        nodes, Arrivals(pods, np.array([0, 1])), registry.build_policy("best-fit"), measure, True
    )
    assert events.placements[0].node == 1  # only B is allowed
    assert events.frag.tolist() == [2000 - 700]


def test_progress_reports_add_up_to_the_pods_replayed():
    """600 pods: two full reports of 256 and the remaining 88 at the end."""
    nodes = [NodeSpec("n0", 4000, 2**30, 1, "T4")]
    pods = [PodRequest(f"c{k}", 1, 0) for k in range(600)]
    told: list[int] = []
    measure = Fragmentation([(Shape(1000, 500, 1), 1.0)])
    replay.run(nodes, Arrivals(pods, np.array([0])), registry.build_policy("best-fit"), measure,
               progress=told.append)  # fmt: skip
    assert told == [256, 256, 88]
    told.clear()
    replay.run(nodes, Arrivals(pods[:512], np.array([0])), registry.build_policy("best-fit"),
               measure, progress=told.append)  # fmt: skip
    assert told == [256, 256]
