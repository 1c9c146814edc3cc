"""The stowage policy: its explanation reproduces its score, and it learns the workload
only from what it is told through ``observe``."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from coordinator.config import CoordinatorSettings
from coordinator.scoring.engine import Engine
from coordinator.scoring.fragmentation import Shape
from coordinator.scoring.registry import PolicyContext, build_policy
from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from coordinator.state.podrequest import PodRequest
from coordinator.state.signals import UNKNOWN, NodeSignals
from tests.coordinator.scoring.builders import GIB, cluster, occupy, pod

PRIOR_RHO = 11.6  # documented CPU milli per milli-GPU assumed before any GPU pod is seen
EXPLAIN_KEYS = {
    "fragmentation_before_milli",
    "fragmentation_after_milli",
    "stranded_before_milli",
    "stranded_after_milli",
    "stranding_weight",
    "pool_cost_milli",
    "delta_milli",
    "placement_score",
    "stowage",
}
LIVE_KEYS = {"pressure_points", "contiguity_points", "nvlink_points"}


def sigmoid_score(delta: float, scale: float = 1000.0) -> int:
    return int(100 * (1 / (1 + math.exp(delta / scale))))


def learning_workload():
    """48 GPU pods with 8 cores per GPU, 16 CPU-only pods: exactly one relearn (64)."""
    return [pod(8000, GIB, gpus=1, name=f"g{k}") for k in range(48)] + [
        pod(2000, GIB, name=f"c{k}") for k in range(16)
    ]


def mixed_state():
    state = cluster(
        (64000, 256 * GIB, 8, "A100"),
        (20000, 128 * GIB, 4, "V100"),
        (4000, 64 * GIB, 2, "T4"),
        (96000, 512 * GIB, 4, "V100"),
        (32000, 64 * GIB),
    )
    occupy(state, 0, cpu=8000, gpu_used=(300, 1000, 0, 0, 500))
    return state


PODS = [
    pod(10000, GIB),
    pod(1000, GIB, gpus=1, milli=500),
    pod(8000, GIB, gpus=1),
    pod(4000, GIB, gpus=2),
    pod(3000, GIB, gpus=1, milli=250),
]


# --------------------------------------------------------------- explain


def check_explanation(policy, state, i, p, live=frozenset()):
    """The parts combine into the score: placement score from Δ, plus live points."""
    parts = policy.explain(state, i, p)
    assert set(parts) == EXPLAIN_KEYS | set(live)
    combined = (
        parts["fragmentation_after_milli"]
        - parts["fragmentation_before_milli"]
        + parts["stranding_weight"]
        * (parts["stranded_after_milli"] - parts["stranded_before_milli"])
        + parts["pool_cost_milli"]
    )
    assert parts["delta_milli"] == pytest.approx(combined, abs=1e-9)
    scale = policy.args.scale_milli
    assert parts["placement_score"] == sigmoid_score(parts["delta_milli"], scale)
    points = sum(parts[k] for k in live)
    assert parts["stowage"] == pytest.approx(parts["placement_score"] + points, abs=1e-9)
    assert parts["stowage"] == policy.score(state, i, p)
    return parts


def test_explain_by_hand_fresh_policy_cpu_pod():
    state = cluster((64000, 256 * GIB, 8))
    policy = build_policy("stowage")
    parts = check_explanation(policy, state, 0, pod(10000, GIB))
    # nothing learnt: no typical shapes, so no fragmentation
    assert parts["fragmentation_before_milli"] == 0
    assert parts["fragmentation_after_milli"] == 0
    # stranded = idle − free CPU / ρ
    assert parts["stranded_before_milli"] == pytest.approx(8000 - 64000 / PRIOR_RHO)
    assert parts["stranded_after_milli"] == pytest.approx(8000 - 54000 / PRIOR_RHO)
    assert parts["stranding_weight"] == 0.3
    assert parts["delta_milli"] == pytest.approx(0.3 * 10000 / PRIOR_RHO)  # 258.6…
    assert parts["stowage"] == 43  # ⌊100/(1 + e^0.2586)⌋ = ⌊43.57⌋


def test_explain_by_hand_fresh_policy_shared_pod():
    state = cluster((4000, 64 * GIB, 2))
    policy = build_policy("stowage")
    parts = check_explanation(policy, state, 0, pod(1000, GIB, gpus=1, milli=500))
    assert parts["stranded_before_milli"] == pytest.approx(2000 - 4000 / PRIOR_RHO)  # 1655.2
    assert parts["stranded_after_milli"] == pytest.approx(1500 - 3000 / PRIOR_RHO)  # 1241.4
    assert parts["stowage"] == 53  # Δ = −124.1 → ⌊100/(1 + e^−0.1241)⌋ = ⌊53.10⌋


def test_stranding_never_goes_below_zero():
    state = cluster((96000, 256 * GIB, 4))
    parts = check_explanation(build_policy("stowage"), state, 0, pod(1000, GIB))
    assert parts["stranded_before_milli"] == 0
    assert parts["stranded_after_milli"] == 0
    assert parts["stowage"] == 50


def test_explain_by_hand_after_learning():
    policy = build_policy("stowage")
    state = cluster((20000, 128 * GIB, 4))
    for p in learning_workload():
        policy.observe(state, p, None)
    parts = check_explanation(policy, state, 0, pod(8000, GIB, gpus=1))
    # M = {(8000, 1000, 1): 0.75, (2000, 0, 0): 0.25}, ρ = 8 CPU milli per milli-GPU
    # before: the GPU shape fits and loses nothing; the CPU shape loses R = 4000 → 1000
    assert parts["fragmentation_before_milli"] == pytest.approx(1000)
    # after [0, 1000, 1000, 1000], 12000 CPU: 0.25·3000
    assert parts["fragmentation_after_milli"] == pytest.approx(750)
    assert parts["stranded_before_milli"] == pytest.approx(4000 - 20000 / 8)
    assert parts["stranded_after_milli"] == pytest.approx(3000 - 12000 / 8)
    assert parts["delta_milli"] == pytest.approx(-250)
    assert parts["stowage"] == 56  # ⌊100/(1 + e^−0.25)⌋ = ⌊56.22⌋


@pytest.mark.parametrize("args", [None, {"stranding_weight": 2.0, "scale_milli": 250.0}])
def test_explanation_reproduces_the_score_everywhere(args):
    policy = build_policy("stowage", args)
    state = mixed_state()
    engine = Engine(state, policy, np.array([4, 2, 0, 3, 1]))
    rng = np.random.default_rng(3)
    for k in range(150):
        template = PODS[int(rng.integers(0, len(PODS)))]
        p = pod(template.cpu_m // 8, GIB // 4, template.gpus, template.gpu_milli, name=f"p{k}")
        feasible = engine.feasible(p)
        for i in np.flatnonzero(feasible).tolist():
            check_explanation(policy, state, i, p)
        engine.place(p)
    assert policy.model.pods == 150


def test_large_delta_with_a_small_scale_scores_zero():
    # a valid configuration; σ(−Δ/scale) underflows towards 0, the score must be 0
    policy = build_policy("stowage", {"scale_milli": 1.0})
    state = cluster((96000, 256 * GIB, 8))
    # stranded 0 → 8000 − 6000/11.6 = 7483: Δ ≈ 2245 milli, Δ/scale ≈ 2245
    assert policy.score(state, 0, pod(90000, GIB)) == 0


# ------------------------------------------------------------- live signals

LINKED_PAIRS = ((0, 1, 0, 0), (1, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 0))  # 0–1 and 2–3
NO_LINKS = ((0,) * 4,) * 4


def signals(**kw) -> NodeSignals:
    return NodeSignals(measured_at=1.0, **kw)


@pytest.mark.parametrize(
    ("cpu_pct", "mem_pct", "points"),
    [
        (55.0, float("nan"), -25.0),  # (55 − 10)/(100 − 10) of 50 points
        (20.0, 100.0, -50.0),  # the worse of the two counts
        (float("nan"), 28.0, -10.0),
    ],
)
def test_pressure_costs_points_above_the_threshold(cpu_pct, mem_pct, points):
    state = cluster((96000, 64 * GIB, 4))
    state.set_signals(0, signals(cpu_pressure_pct=cpu_pct, memory_pressure_pct=mem_pct))
    policy = build_policy("stowage")
    parts = check_explanation(policy, state, 0, pod(1000, GIB), live={"pressure_points"})
    assert parts["placement_score"] == 50
    assert parts["pressure_points"] == pytest.approx(points)
    assert policy.score(state, 0, pod(1000, GIB)) == pytest.approx(50 + points)


def test_pressure_at_or_below_the_threshold_is_free():
    state = cluster((96000, 64 * GIB, 4))
    state.set_signals(0, signals(cpu_pressure_pct=10.0, memory_pressure_pct=3.0))
    check_explanation(build_policy("stowage"), state, 0, pod(1000, GIB))
    policy = build_policy("stowage", {"pressure_threshold_pct": 0, "pressure_points": 10})
    parts = check_explanation(policy, state, 0, pod(1000, GIB), live={"pressure_points"})
    assert parts["pressure_points"] == pytest.approx(-1.0)  # 10 % of 10 points


def test_contiguity_short_node_loses_points():
    state = cluster((96000, 64 * GIB, 4), (96000, 64 * GIB, 4), (96000, 64 * GIB, 4))
    state.set_signals(0, signals(contiguous_2mib_b=1 * GIB))
    state.set_signals(1, signals(contiguous_2mib_b=8 * GIB))
    policy = build_policy("stowage")
    needy = pod(1000, GIB, contiguous=4 * GIB)
    parts = check_explanation(policy, state, 0, needy, live={"contiguity_points"})
    assert parts["contiguity_points"] == -20
    check_explanation(policy, state, 1, needy)  # enough blocks
    check_explanation(policy, state, 2, needy)  # unknown: neutral
    check_explanation(policy, state, 0, pod(1000, GIB))  # an ordinary pod does not care
    assert Engine(state, policy).choose(needy).node == 1


def test_nvlink_chooses_linked_devices_and_scores_them():
    state = cluster((96000, 64 * GIB, 4))
    state.set_signals(0, signals(gpu_links=LINKED_PAIRS))
    occupy(state, 0, gpu_used=(0, 1000))  # device 1 taken: 0 is linked to no free device
    policy = build_policy("stowage")
    two = pod(1000, GIB, gpus=2)
    assert policy.devices(state, 0, two) == (2, 3)
    parts = check_explanation(policy, state, 0, two, live={"nvlink_points"})
    assert parts["nvlink_points"] == 5
    # three devices: one linked pair out of three, neither all nor none → no adjustment
    check_explanation(policy, state, 0, pod(1000, GIB, gpus=3))
    # one GPU: links play no part
    check_explanation(policy, state, 0, pod(1000, GIB, gpus=1))


def test_nvlink_none_linked_loses_points_and_unknown_is_neutral():
    state = cluster((96000, 64 * GIB, 4), (96000, 64 * GIB, 4))
    state.set_signals(0, signals(gpu_links=NO_LINKS))
    policy = build_policy("stowage")
    two = pod(1000, GIB, gpus=2)
    parts = check_explanation(policy, state, 0, two, live={"nvlink_points"})
    assert parts["nvlink_points"] == -5
    assert policy.devices(state, 0, two) == (0, 1)
    check_explanation(policy, state, 1, two)
    assert Engine(state, policy).choose(two).node == 1
    state.set_signals(0, UNKNOWN)
    check_explanation(policy, state, 0, two)


@pytest.mark.parametrize("seed", range(5))
def test_nvlink_points_of_many_nodes_are_each_nodes_own(seed: int):
    """Nodes are grouped by placement state and link matrix to score NVLink once per
    group; every node must still get what it gets scored alone."""
    rng = np.random.default_rng(seed)
    matrices = [LINKED_PAIRS, NO_LINKS, ((0, 1, 1, 1), (1, 0, 1, 1), (1, 1, 0, 1), (1, 1, 1, 0))]
    state = cluster(*[(96000, 64 * GIB, 4)] * 60)
    for i in range(60):
        used = tuple(int(u) for u in rng.choice([0, 0, 1000, 500], size=4))
        occupy(state, i, gpu_used=used)
        k = int(rng.integers(0, len(matrices) + 1))
        if k < len(matrices):  # equal matrices from separate reports, as agents send them
            links = tuple(tuple(row) for row in matrices[k])
            state.set_signals(i, signals(gpu_links=links))
    policy = build_policy("stowage")
    nodes = np.arange(60)
    for two in (pod(1000, GIB, gpus=2), pod(1000, GIB, gpus=3)):
        together = policy._live(state, nodes, two).get("nvlink_points", np.full(60, np.nan))
        alone = [
            policy._nvlink_points(state, i, two) if state.gpu_links[i] is not None else math.nan
            for i in range(60)
        ]
        np.testing.assert_array_equal(together, np.array(alone))
    assert len({id(state.gpu_links[i]) for i in range(60) if state.gpu_links[i]}) <= 3
    keys = {int(state.gpu_links_key[i]): state.gpu_links[i] for i in range(60)}
    assert keys.pop(-1, None) is None
    assert len(set(map(id, keys.values()))) == len(keys)  # one matrix per key


# ---------------------------------------------------------------- learning


def test_a_fresh_policy_without_stranding_scores_every_feasible_node_equally():
    policy = build_policy("stowage", {"stranding_weight": 0})
    state = mixed_state()
    engine = Engine(state, policy)
    for p in PODS:
        feasible = engine.feasible(p)
        scores = engine.scores(p, feasible)[feasible]
        assert feasible.sum() >= 2
        assert scores.tolist() == [50.0] * int(feasible.sum())


def test_a_fresh_policy_sees_no_fragmentation_anywhere():
    policy = build_policy("stowage")
    state = mixed_state()
    engine = Engine(state, policy)
    for p in PODS:
        for i in np.flatnonzero(engine.feasible(p)).tolist():
            parts = policy.explain(state, i, p)
            assert parts["fragmentation_before_milli"] == 0
            assert parts["fragmentation_after_milli"] == 0


def test_the_build_context_workload_is_not_learnt():
    workload = learning_workload() * 3
    informed = build_policy("stowage", None, PolicyContext(workload=workload, seed=9))
    blank = build_policy("stowage")
    assert informed.model.pods == 0
    assert informed.epoch == 0
    state = mixed_state()
    engine = Engine(state, blank)
    for p in PODS:
        for i in np.flatnonzero(engine.feasible(p)).tolist():
            assert informed.explain(state, i, p) == blank.explain(state, i, p)


def test_observed_pods_are_counted_and_learnt_at_64():
    policy = build_policy("stowage")
    state = cluster((20000, 128 * GIB, 4))
    p = pod(8000, GIB, gpus=1)
    fresh_score = policy.score(state, 0, p)
    workload = learning_workload()
    for seen in workload[:63]:
        policy.observe(state, seen, None)
    assert policy.model.pods == 63
    assert policy.epoch == 0
    assert policy.score(state, 0, p) == fresh_score  # counted, not yet learnt
    policy.observe(state, workload[63], None)
    assert policy.model.pods == 64
    assert policy.model.shapes == Counter({Shape(8000, 1000, 1): 48, Shape(2000, 0, 0): 16})
    assert policy.model.cpu_m_per_gpu_milli == pytest.approx(8.0)
    assert policy.epoch == 1
    assert policy.score(state, 0, p) != fresh_score


def test_unplaced_pods_are_observed_too():
    policy = build_policy("stowage")
    state = cluster((1000, GIB, 1))
    engine = Engine(state, policy)
    assert engine.place(pod(8000, GIB, gpus=1)) is None
    assert policy.model.pods == 1


@pytest.mark.parametrize(
    ("relearn_max", "observed", "epoch"),
    [
        (4096, 63, 0),
        (4096, 64, 1),
        (4096, 127, 1),
        (4096, 128, 2),
        (4096, 255, 2),
        (4096, 256, 3),
        (4096, 512, 4),
        (64, 128, 2),
        (64, 191, 2),
        (64, 192, 3),
        (64, 320, 5),
        (128, 383, 3),
        (128, 384, 4),  # 64, 128, 256, then every 128: 384
    ],
)
def test_relearn_schedule(relearn_max, observed, epoch):
    policy = build_policy("stowage", {"relearn_max": relearn_max})
    state = cluster((1000, GIB))
    for _ in range(observed):
        policy.observe(state, pod(100, 0), None)
    assert policy.epoch == epoch


def test_cpu_only_pods_keep_off_cpu_a_nodes_whole_gpus_need():
    """ρ defaults to 11.6 CPU milli per milli-GPU: one whole free GPU needs 11 600 m."""
    specs = [NodeSpec("gpu", 20_000, 2**40, 1, "A"), NodeSpec("cpu-rich", 40_000, 2**40, 1, "A")]
    cpu_pod = PodRequest("c", 10_000, 0)
    state = ClusterState(specs)
    reserving = Engine(state, build_policy("stowage", {"reserve_gpu_cpu": True}))
    # 20 000 − 10 000 = 10 000 < 11 600 on "gpu": only "cpu-rich" (30 000 left) admits it.
    assert reserving.choose(cpu_pod).node == 1
    state.allocate(Placement(1, ()), 25_000, 0, 0, None)
    assert reserving.choose(cpu_pod) is None  # waits rather than strand a whole GPU
    placing = Engine(state, build_policy("stowage"))
    assert placing.choose(cpu_pod) is not None  # off by default
    # A node whose GPU is in use has nothing to reserve for.
    state.allocate(Placement(0, (0,)), 1_000, 0, 1000, "1-gpu")
    assert reserving.choose(cpu_pod).node == 0


def test_the_live_coordinator_places_cpu_only_pods_next_to_free_gpus_by_default():
    """A CPU-only pod left pending while a GPU node shows free CPU is the complaint the
    reservation would cause in a live cluster: the coordinator's default settings keep it off."""
    settings = CoordinatorSettings()
    state = ClusterState([NodeSpec("gpu", 20_000, 2**40, 1, "A")])
    engine = Engine(state, build_policy(settings.policy.name, settings.policy.args))
    # 20 000 − 10 000 leaves less than the 11 600 m one whole free GPU would need.
    assert engine.choose(PodRequest("c", 10_000, 0)).node == 0
