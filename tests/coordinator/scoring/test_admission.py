"""Admission rules apart from policies: ``reserve-gpu-cpu`` by hand (its ρ learnt only
from pods seen, behind a guard), and the same rule on any policy through ``Admitted``."""

from __future__ import annotations

import numpy as np
import pytest

from common.errors import ConfigError
from coordinator.scoring import admission
from coordinator.scoring.admission import MIN_GPU_PODS, Admitted, ReserveGpuCpu
from coordinator.scoring.engine import Engine
from coordinator.scoring.registry import PolicyContext, build_policy
from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from tests.coordinator.scoring.builders import GIB, occupy, pod


def two_nodes() -> ClusterState:
    """n0: 20 000 m, one whole free GPU; n1: 40 000 m, one whole free GPU."""
    return ClusterState([NodeSpec("n0", 20_000, GIB, 1, "A"), NodeSpec("n1", 40_000, GIB, 1, "A")])


ALL = np.array([True, True])


def test_cpu_only_pod_keeps_off_a_node_whose_whole_gpus_need_the_cpu():
    """Prior ρ = 11.6 m per milli-GPU: one whole free GPU keeps 11 600 m."""
    state, rule = two_nodes(), ReserveGpuCpu()
    # n0: 20 000 − 10 000 = 10 000 < 11 600 → refused; n1: 30 000 left → admitted
    assert rule.admit(state, pod(cpu=10_000), ALL).tolist() == [False, True]
    # 8 400 leaves exactly 11 600 on n0: admitted (the bound is inclusive)
    assert rule.admit(state, pod(cpu=8_400), ALL).tolist() == [True, True]
    assert rule.admit(state, pod(cpu=8_401), ALL).tolist() == [False, True]
    # a GPU pod is never held back by the rule
    assert rule.admit(state, pod(cpu=19_000, gpus=1), ALL).tolist() == [True, True]
    # nodes already out of the running stay out
    assert rule.admit(state, pod(cpu=100), np.array([False, True])).tolist() == [False, True]


def test_a_gpu_in_use_keeps_nothing_back():
    state, rule = two_nodes(), ReserveGpuCpu()
    occupy(state, 0, gpu_used=[1])  # 999 milli free: not a whole GPU any more
    assert rule.admit(state, pod(cpu=19_000), ALL).tolist() == [True, True]


def test_rho_is_the_prior_until_enough_gpu_pods_were_seen():
    """GPU pods of 1 GPU and 2 000 m: ρ = 2 once learnt, so one whole GPU keeps 2 000 m."""
    state, rule = two_nodes(), ReserveGpuCpu()
    big = pod(cpu=15_000)  # n0 keeps 5 000: refused under 11.6, admitted under 2
    for _ in range(MIN_GPU_PODS - 1):
        rule.observe(pod(cpu=2_000, gpus=1))
        rule.observe(pod(cpu=64_000))  # CPU-only pods do not move ρ
    assert rule.rho == pytest.approx(11.6)
    assert rule.admit(state, big, ALL).tolist() == [False, True]
    rule.observe(pod(cpu=2_000, gpus=1))  # the 64th GPU pod
    assert rule.rho == pytest.approx(2.0)
    assert rule.admit(state, big, ALL).tolist() == [True, True]


def test_one_odd_first_gpu_pod_does_not_swing_rho():
    rule = ReserveGpuCpu()
    rule.observe(pod(cpu=96_000, gpus=1))  # 96 m per milli-GPU if believed
    state = two_nodes()
    assert rule.admit(state, pod(cpu=8_000), ALL).tolist() == [True, True]


def test_fgd_with_the_rule_refuses_what_stowage_with_its_argument_refuses():
    state = two_nodes()
    occupy(state, 1, cpu=25_000)  # n1 keeps 15 000 − 10 000 = 5 000 < 11 600
    cpu_pod = pod(cpu=10_000)
    context = PolicyContext([pod(cpu=1_000, gpus=1), cpu_pod])
    fgd = Engine(
        state, admission.with_rules(build_policy("fgd", None, context), ["reserve-gpu-cpu"])
    )
    stowage = Engine(state, build_policy("stowage", {"reserve_gpu_cpu": True}))
    assert fgd.choose(cpu_pod) is None
    assert stowage.choose(cpu_pod) is None
    assert Engine(state, build_policy("fgd", None, context)).choose(cpu_pod) is not None
    assert isinstance(stowage.policy.admission[0], ReserveGpuCpu)  # one definition


def test_the_wrapper_scores_as_the_policy_alone():
    state = ClusterState([NodeSpec(f"n{i}", 64_000, 64 * GIB, 4, "A") for i in range(3)])
    occupy(state, 1, cpu=8_000, gpu_used=[300])
    occupy(state, 2, cpu=2_000, gpu_used=[1000, 1000])
    bare = build_policy("stowage")
    wrapped = Admitted(build_policy("stowage"), admission.build_rules(["reserve-gpu-cpu"]))
    nodes = np.arange(3)
    for p in (pod(cpu=4_000, gpus=1, milli=500), pod(cpu=8_000, gpus=2), pod(cpu=1_000)):
        assert (
            wrapped.score_nodes(state, p, nodes).tolist()
            == bare.score_nodes(state, p, nodes).tolist()
        )
        assert wrapped.devices(state, 1, p) == bare.devices(state, 1, p)
        assert wrapped.shape_key(p) == bare.shape_key(p)
    assert wrapped.name == "stowage"
    for _ in range(64):  # the wrapped policy relearns: the engine must see its epoch move
        wrapped.observe(state, pod(cpu=1_000, gpus=1), Placement(0, (0,)))
    assert wrapped.epoch == wrapped.policy.epoch == 1
    assert wrapped.rules[0].gpu_pods == 64  # the rule was told too


def test_rules_in_force_are_named_once():
    plain = build_policy("fgd")
    assert admission.with_rules(plain, []) is plain
    assert admission.in_force(plain) == ()
    reserving = build_policy("stowage", {"reserve_gpu_cpu": True})
    assert admission.in_force(reserving) == ("reserve-gpu-cpu",)
    both = admission.with_rules(reserving, ["reserve-gpu-cpu"])
    assert admission.in_force(both) == ("reserve-gpu-cpu",)
    assert both.rules == ()  # not applied twice
    assert admission.in_force(admission.with_rules(plain, ["reserve-gpu-cpu"])) == (
        "reserve-gpu-cpu",
    )


def test_an_unknown_rule_is_named():
    with pytest.raises(ConfigError, match="unknown admission rule 'nope'; known: reserve-gpu-cpu"):
        admission.build_rules(["nope"])
