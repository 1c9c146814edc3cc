"""Pool pressure: the GPU demand that can only go to some models, learnt from the pods
seen, and what a pod with other choices pays for taking a pool that demand will need."""

from __future__ import annotations

import numpy as np
import pytest

from common.errors import ConfigError
from coordinator.scoring.engine import Engine
from coordinator.scoring.registry import PolicyContext, build_policy
from coordinator.scoring.workload import WorkloadModel
from coordinator.state.cluster import Placement
from tests.coordinator.scoring.builders import GIB, cluster, pod


def model_of(*pods) -> WorkloadModel:
    model = WorkloadModel()
    for p in pods:
        model.observe(p)
    return model


def seen_pods():
    """10 GPUs asked for: 6 by any model, 2 by V only, 2 by V or T; CPU-only pods count
    nothing."""
    return [
        *[pod(1000, GIB, gpus=1, name=f"any{k}") for k in range(4)],
        pod(1000, GIB, gpus=2, name="any-two"),
        pod(1000, GIB, gpus=1, models={"V"}, name="v0"),
        pod(1000, GIB, gpus=2, milli=500, models={"V"}, name="v1"),
        pod(1000, GIB, gpus=1, milli=1000, models={"V", "T"}, name="vt0"),
        pod(1000, GIB, gpus=2, milli=500, models={"T", "V"}, name="vt1"),
        pod(4000, GIB, name="cpu"),
    ]


def test_demand_is_counted_by_the_models_it_accepts():
    model = model_of(*seen_pods())
    assert model.gpu_milli_by_models == {
        frozenset(): 6000,
        frozenset({"V"}): 2000,
        frozenset({"V", "T"}): 2000,
    }


def test_pressure_by_hand():
    model = model_of(*seen_pods())
    pressure = model.pool_pressure({"G": 8000, "V": 1000, "T": 3000})
    # V or T demand splits by free GPU: V gets 2000·1/4, T 2000·3/4. Share of all demand
    # (10 000) times the cluster's free GPU (12 000), against the pool's free GPU:
    # V: (2000 + 500)/10 000 · 12 000 / 1000 = 3.0 → 1; T: 1500/10 000 · 12 000 / 3000 = 0.6
    assert pressure == pytest.approx({"G": 0.0, "V": 1.0, "T": 0.6})


def test_a_full_pool_passes_its_alternatives_demand_on():
    model = model_of(*seen_pods())
    pressure = model.pool_pressure({"G": 8000, "V": 0, "T": 3000})
    # V-only demand has nowhere to go; V or T all goes to T: 2000/10 000 · 11 000 / 3000
    assert pressure == pytest.approx({"G": 0.0, "V": 1.0, "T": 2000 / 10_000 * 11_000 / 3000})


def test_no_gpu_demand_no_pressure():
    assert model_of(pod(1000, GIB)).pool_pressure({"G": 8000}) == {"G": 0.0}
    assert model_of(pod(1000, GIB, gpus=1)).pool_pressure({"G": 8000, "V": 8}) == {
        "G": 0.0,
        "V": 0.0,
    }


# ------------------------------------------------------------------- policy


def pools_state():
    """One 8-GPU node each of G and T, one 4-GPU V node, CPU to spare everywhere."""
    return cluster(
        (512_000, 512 * GIB, 8, "G"),
        (512_000, 512 * GIB, 8, "T"),
        (512_000, 512 * GIB, 4, "V"),
    )


def learnt_policy(args=None):
    """Told of :func:`seen_pods` (10 pods) with ``pool_refresh`` 10: pressure measured once,
    on the empty :func:`pools_state` (G 8000, T 8000, V 4000 free; 20 000 in all); cost
    linear in pressure, β = 1, unless ``args`` say otherwise."""
    linear = {"pool_refresh": 10, "pool_weight": 1, "pool_exponent": 1}
    policy = build_policy("stowage", {**linear, **(args or {})})
    state = pools_state()
    for p in seen_pods():
        policy.observe(state, p, None)
    return policy, state


def test_pool_cost_by_hand():
    policy, _ = learnt_policy()
    # V or T splits 4000 : 8000 → V 2000 + 666.7, T 1333.3 of 10 000 seen:
    # V 0.2667 · 20 000 / 4000 = 1.333 → 1; T 0.1333 · 20 000 / 8000 = 0.3333 → 21/64 in
    # steps of 1/64; G 0
    assert policy._pressure == {"G": 0.0, "T": 21 / 64, "V": 1.0}
    whole = pod(1000, GIB, gpus=1)
    assert policy.pool_cost(whole, "G") == 0
    assert policy.pool_cost(whole, "T") == pytest.approx(1000 * 21 / 64)
    assert policy.pool_cost(whole, "V") == pytest.approx(1000)
    two_halves = pod(1000, GIB, gpus=2, milli=500, models={"V", "T"})
    assert policy.pool_cost(two_halves, "T") == 0  # its least pressed choice
    assert policy.pool_cost(two_halves, "V") == pytest.approx(1000 * (1 - 21 / 64))
    assert policy.pool_cost(pod(1000, GIB, gpus=1, models={"V"}), "V") == 0  # no choice
    assert policy.pool_cost(pod(1000, GIB), "V") == 0  # CPU only
    weighted, _ = learnt_policy({"pool_weight": 0.5})
    assert weighted.pool_cost(whole, "V") == pytest.approx(500)


def test_the_pool_exponent_weighs_sure_shortage_above_likely_shortage():
    policy, _ = learnt_policy({"pool_exponent": 2})
    # T: (1/3)² = 1/9 = 7.1/64 → 7/64
    assert policy._pressure == {"G": 0.0, "T": 7 / 64, "V": 1.0}
    two_halves = pod(1000, GIB, gpus=2, milli=500, models={"V", "T"})
    assert policy.pool_cost(two_halves, "V") == pytest.approx(1000 * (1 - 7 / 64))
    assert policy.pool_cost(pod(1000, GIB, gpus=1), "T") == pytest.approx(1000 * 7 / 64)


def test_pool_cost_enters_the_score_and_the_explanation():
    policy, state = learnt_policy()
    whole = pod(1000, GIB, gpus=1)
    parts = policy.explain(state, 2, whole)
    assert parts["pool_cost_milli"] == pytest.approx(1000)
    others = (
        parts["fragmentation_after_milli"]
        - parts["fragmentation_before_milli"]
        + parts["stranding_weight"]
        * (parts["stranded_after_milli"] - parts["stranded_before_milli"])
    )
    assert parts["delta_milli"] == pytest.approx(others + 1000)
    assert parts["stowage"] == policy.score(state, 2, whole)


def test_a_pod_with_choices_keeps_off_the_pool_others_need():
    policy, state = learnt_policy()
    engine = Engine(state, policy, rank=[2, 1, 0])  # ties would go to V, then T
    assert engine.choose(pod(1000, GIB, gpus=1)).node == 0  # G
    assert engine.choose(pod(1000, GIB, gpus=1, models={"V", "T"})).node == 1  # T
    assert engine.choose(pod(1000, GIB, gpus=1, models={"V"})).node == 2
    blind, state = learnt_policy({"pool_weight": 0})
    assert Engine(state, blind, rank=[2, 1, 0]).choose(pod(1000, GIB, gpus=1)).node == 2


def test_pressure_is_measured_every_pool_refresh_pods_from_the_free_gpu_then():
    policy = build_policy("stowage", {"pool_refresh": 10, "pool_exponent": 1})
    state = pools_state()
    for p in seen_pods()[:9]:
        policy.observe(state, p, None)
    assert policy._pressure == {}
    assert policy.epoch == 0
    state.allocate(Placement(0, tuple(range(8))), 1000, GIB, 1000, "8-gpu")  # G is full
    policy.observe(state, seen_pods()[9], None)
    assert policy.epoch == 1  # scores change: the engine drops its cache
    # free: G 0, T 8000, V 4000 (12 000): V 2666.7/10 000 · 12 000 / 4000 = 0.8 → 51/64,
    # T 1333.3/10 000 · 12 000 / 8000 = 0.2 → 13/64
    assert policy._pressure == {"G": 1.0, "T": 13 / 64, "V": 51 / 64}
    # the same free GPU ten pods later: the same pressure, the cached scores stay
    for p in seen_pods():
        policy.observe(state, p, None)
    assert policy.model.pods == 20
    assert policy.epoch == 1


def test_unconstrained_pods_alone_leave_the_policy_as_it_was():
    policy = build_policy("stowage", {"pool_refresh": 1})
    state = pools_state()
    for k in range(20):
        policy.observe(state, pod(1000, GIB, gpus=1, name=f"g{k}"), None)
    assert policy._pressure == {}
    assert policy.epoch == 0


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"pool_weight": -0.1}, "stowage.pool_weight: expected 0..100"),
        ({"pool_weight": 101}, "stowage.pool_weight: expected 0..100"),
        ({"pool_refresh": 0}, "stowage.pool_refresh: expected at least 1"),
        ({"pool_exponent": 0}, "stowage.pool_exponent: expected 0 < value <= 10"),
        ({"pool_exponent": 10.5}, "stowage.pool_exponent: expected 0 < value <= 10"),
    ],
)
def test_bad_pool_arguments_are_named(args, problem):
    with pytest.raises(ConfigError) as e:
        build_policy("stowage", args)
    assert str(e.value) == problem


def test_by_default_the_cost_is_twice_the_squared_pressure():
    policy = build_policy("stowage", {"pool_refresh": 10})
    state = pools_state()
    for p in seen_pods():
        policy.observe(state, p, None)
    # pressures as in test_pool_cost_by_hand: T 1/3 (squared 7/64), V 1
    assert policy.pool_cost(pod(1000, GIB, gpus=1), "T") == pytest.approx(2 * 1000 * 7 / 64)
    assert policy.pool_cost(pod(1000, GIB, gpus=1), "V") == pytest.approx(2000)


def test_decisions_never_depend_on_pods_still_to_come():
    """A truncated pod list gets exactly the full list's first decisions: what stowage
    learns (typical shapes, ρ, pool pressure) comes from the pods seen, never from the
    workload it is built with."""
    rng = np.random.default_rng(3)
    specs = [(64_000, 256 * GIB, 8, "G")] * 6 + [(16_000, 64 * GIB, 2, "T")] * 6
    specs += [(32_000, 128 * GIB, 4, "V")] * 3
    choices = [(), (), ("V",), ("T",), ("T", "V")]
    pods = []
    for k in range(400):
        cpu, gpus = int(rng.integers(1, 9)) * 1000, int(rng.choice([0, 1, 1, 2]))
        milli = int(rng.choice([250, 500, 1000])) if gpus else None
        models = choices[int(rng.integers(len(choices)))] if gpus else ()
        pods.append(pod(cpu, GIB, gpus=gpus, milli=milli, models=models, name=f"p{k}"))

    def placements(seen):
        policy = build_policy("stowage", {"pool_refresh": 16}, PolicyContext(seen, 1))
        engine = Engine(cluster(*specs), policy, rank=rng_rank)
        return [engine.place(p) for p in seen], policy

    rng_rank = np.random.default_rng(5).permutation(len(specs))
    full, policy = placements(pods)
    assert policy._pressure  # the pools were pressed: the check covers the pool cost
    assert sum(p is None for p in full) > 0  # and the cluster filled up
    assert placements(pods[:150])[0] == full[:150]
    assert placements(pods[:311])[0] == full[:311]
    # The check has teeth: a policy told of the whole list beforehand decides otherwise.
    told = build_policy("stowage", {"pool_refresh": 16})
    for p in pods:
        told.observe(cluster(*specs), p, None)
    engine = Engine(cluster(*specs), told, rank=rng_rank)
    assert [engine.place(p) for p in pods[:150]] != full[:150]
