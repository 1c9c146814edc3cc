"""Property tests: every registered policy, on random small clusters and pod sequences,
only makes placements that fit, keeps the state consistent, and gives up on a pod only
when no node could take it (checked by brute force, not with the engine's filter)."""

from __future__ import annotations

import copy
import random as stdlib_random
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.scoring.engine import Engine
from coordinator.scoring.registry import POLICIES, PolicyContext, build_policy
from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from coordinator.state.podrequest import PodRequest
from coordinator.state.signals import NodeSignals
from tests.coordinator.scoring.builders import GIB

MODELS = ("A10", "V100", "A100")
POD_MODELS = (*MODELS, "H100")  # H100 is on no node: such pods never fit


@st.composite
def node_specs(draw: st.DrawFn) -> list[NodeSpec]:
    n = draw(st.integers(1, 12))
    specs = []
    for i in range(n):
        gpus = draw(st.integers(0, 8))
        model = draw(st.sampled_from(MODELS)) if gpus else ""
        cpu = draw(st.sampled_from([0, 2000, 8000, 32000, 64000, 96000]) | st.integers(0, 128000))
        mem = draw(st.sampled_from([0, 4 * GIB, 64 * GIB, 256 * GIB]) | st.integers(0, 512 * GIB))
        specs.append(NodeSpec(f"node-{i}", cpu, mem, gpus, model))
    return specs


@st.composite
def pods(draw: st.DrawFn) -> PodRequest:
    kind = draw(st.sampled_from(["cpu", "share", "whole", "multi"]))
    cpu = draw(st.integers(0, 16000))
    mem = draw(st.integers(0, 64 * GIB))
    gpus, milli = 0, 0
    if kind == "share":
        gpus, milli = 1, draw(st.integers(1, 999))
    elif kind == "whole":
        gpus, milli = 1, 1000
    elif kind == "multi":
        gpus, milli = draw(st.sampled_from([2, 4, 8])), 1000
    models: frozenset[str] = frozenset()
    if gpus and draw(st.booleans()):
        models = frozenset(draw(st.sets(st.sampled_from(POD_MODELS), min_size=1, max_size=2)))
    contiguous = draw(st.sampled_from([0, 0, 0, GIB, 16 * GIB]))
    return PodRequest("pod", cpu, mem, gpus, milli, models, contiguous)


def pod_lists(max_size: int) -> st.SearchStrategy[list[PodRequest]]:
    return st.lists(pods(), min_size=1, max_size=max_size).map(
        lambda ps: [
            PodRequest(
                f"pod-{k}", p.cpu_m, p.mem_b, p.gpus, p.gpu_milli, p.gpu_models, p.contiguous_b
            )
            for k, p in enumerate(ps)
        ]
    )


@st.composite
def node_signals(draw: st.DrawFn, spec: NodeSpec) -> NodeSignals | None:
    """Live signals of a node, or None (never reported: neutral)."""
    if draw(st.booleans()):
        return None
    pct = st.floats(0, 100) | st.just(float("nan"))
    links = None
    if spec.gpus and draw(st.booleans()):
        upper = {
            (a, b): draw(st.integers(0, 2))
            for a in range(spec.gpus)
            for b in range(a + 1, spec.gpus)
        }
        links = tuple(
            tuple(0 if a == b else upper[min(a, b), max(a, b)] for b in range(spec.gpus))
            for a in range(spec.gpus)
        )
    return NodeSignals(
        measured_at=1.0,
        cpu_pressure_pct=draw(pct),
        memory_pressure_pct=draw(pct),
        contiguous_2mib_b=draw(st.sampled_from([-1, 0, 2 * GIB, 64 * GIB])),
        true_allocatable_mem_b=draw(st.sampled_from([-1, 0, spec.mem_b // 2, spec.mem_b * 2])),
        gpu_links=links,
    )


@st.composite
def scenarios(draw: st.DrawFn, max_pods: int):
    specs = draw(node_specs())
    signals = [draw(node_signals(s)) for s in specs]
    workload = draw(pod_lists(max_pods))
    rank = draw(st.permutations(range(len(specs))))
    seed = draw(st.integers(0, 2**32 - 1))
    return specs, signals, workload, np.array(rank, dtype=np.int64), seed


def new_state(specs: list[NodeSpec], signals: list[NodeSignals | None]) -> ClusterState:
    state = ClusterState(specs)
    for i, sig in enumerate(signals):
        if sig is not None:
            state.set_signals(i, sig)
    return state


def fits(state: ClusterState, i: int, p: PodRequest) -> bool:
    """Brute force: could node ``i`` take ``p`` as it stands? Memory is the nominal free
    memory, less what the agent found missing from the node's allocatable."""
    mem_free = int(state.mem_free[i])
    true_allocatable = int(state.true_allocatable_mem_b[i])
    if true_allocatable >= 0 and true_allocatable < state.mem_cap[i]:
        mem_free -= int(state.mem_cap[i]) - true_allocatable
    if state.cpu_free[i] < p.cpu_m or mem_free < p.mem_b:
        return False
    if not p.gpus:
        return True
    model = state.models[state.model_id[i]]
    if p.gpu_models and model not in p.gpu_models:
        return False
    roomy = [d for d in range(int(state.gpu_count[i])) if state.gpu_free[i, d] >= p.gpu_milli]
    return len(roomy) >= p.gpus


def check_placement(before: ClusterState, after: ClusterState, p: PodRequest, pl: Placement):
    i = pl.node
    assert 0 <= i < len(before)
    assert fits(before, i, p), f"{p} placed on {before.names[i]}, which cannot take it"
    assert len(pl.devices) == p.gpus
    assert len(set(pl.devices)) == len(pl.devices)
    for d in pl.devices:
        assert 0 <= d < before.gpu_count[i]
        assert before.gpu_free[i, d] >= p.gpu_milli
    # exactly the pod's resources left node i, nothing moved anywhere else
    expected_gpu = before.gpu_free.copy()
    for d in pl.devices:
        expected_gpu[i, d] -= p.gpu_milli
    expected_cpu = before.cpu_free.copy()
    expected_cpu[i] -= p.cpu_m
    expected_mem = before.mem_free.copy()
    expected_mem[i] -= p.mem_b
    assert np.array_equal(after.gpu_free, expected_gpu)
    assert np.array_equal(after.cpu_free, expected_cpu)
    assert np.array_equal(after.mem_free, expected_mem)


def gpus_in_range(state: ClusterState) -> None:
    for i in range(len(state)):
        for d in range(int(state.gpu_count[i])):
            assert 0 <= state.gpu_free[i, d] <= 1000


def run_and_check(name: str, specs, signals, workload, rank, seed) -> None:
    state = new_state(specs, signals)
    policy = build_policy(name, None, PolicyContext(workload=workload, seed=seed))
    engine = Engine(state, policy, rank)
    placed: list[tuple[PodRequest, Placement]] = []
    for p in workload:
        before = copy.deepcopy(state)
        placement = engine.place(p)
        if placement is None:
            # Only nodes with room that the policy admits (stowage keeps CPU-only pods off
            # CPU a node's whole free GPUs need) may be left unused.
            room = np.array([fits(before, i, p) for i in range(len(state))], dtype=bool)
            admitted = policy.admit(before, p, room)
            assert not admitted.any(), f"{name} gave up on {p} though a node could take it"
            assert np.array_equal(state.gpu_free, before.gpu_free)
            assert np.array_equal(state.cpu_free, before.cpu_free)
        else:
            check_placement(before, state, p, placement)
            placed.append((p, placement))
        gpus_in_range(state)
    state.check()

    used_gpu = int((state.gpu_cap - state.gpu_free)[state.gpu_cap == 1000].sum())
    assert used_gpu == sum(p.gpu_total_milli for p, _ in placed)
    assert int((state.cpu_cap - state.cpu_free).sum()) == sum(p.cpu_m for p, _ in placed)
    assert int((state.mem_cap - state.mem_free).sum()) == sum(p.mem_b for p, _ in placed)
    tags = [Counter() for _ in specs]
    for p, pl in placed:
        if p.tag is not None:
            tags[pl.node][p.tag] += 1
    assert state.gpu_tags == tags

    stdlib_random.Random(seed).shuffle(placed)
    for p, pl in placed:
        state.release(pl, p.cpu_m, p.mem_b, p.gpu_milli, p.tag)
    state.check()
    assert np.array_equal(state.cpu_free, state.cpu_cap)
    assert np.array_equal(state.mem_free, state.mem_cap)
    assert np.array_equal(state.gpu_free, state.gpu_cap)
    assert all(not t for t in state.gpu_tags)


POLICY_NAMES = sorted(POLICIES)
CACHEABLE = [n for n in POLICY_NAMES if n != "random"]
COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", POLICY_NAMES)
@settings(COMMON, max_examples=20)
@given(scenario=scenarios(max_pods=25))
def test_every_placement_fits_and_release_restores_empty(name, scenario):
    run_and_check(name, *scenario)


@pytest.mark.slow
@pytest.mark.parametrize("name", POLICY_NAMES)
@settings(COMMON, max_examples=400)
@given(scenario=scenarios(max_pods=150))
def test_every_placement_fits_many_examples(name, scenario):
    run_and_check(name, *scenario)


def run_cache_check(name: str, specs, signals, workload, rank, seed) -> None:
    """The cached engine agrees with direct scoring and with an engine that never saw the
    state before, at every step."""
    state = new_state(specs, signals)
    policy = build_policy(name, None, PolicyContext(workload=workload, seed=seed))
    engine = Engine(state, policy, rank)
    for p in workload:
        feasible = engine.feasible(p)
        cached = engine.scores(p, feasible)
        for i in np.flatnonzero(feasible).tolist():
            assert cached[i] == policy.score(state, i, p), (name, p, i)
        assert np.isnan(cached[~feasible]).all()
        fresh = Engine(state, policy, rank).choose(p)
        assert engine.place(p) == fresh


@pytest.mark.parametrize("name", CACHEABLE)
@settings(COMMON, max_examples=15)
@given(scenario=scenarios(max_pods=25))
def test_cached_scores_match_a_fresh_engine(name, scenario):
    run_cache_check(name, *scenario)


@pytest.mark.slow
@pytest.mark.parametrize("name", CACHEABLE)
@settings(COMMON, max_examples=200)
@given(scenario=scenarios(max_pods=150))
def test_cached_scores_match_a_fresh_engine_many_examples(name, scenario):
    run_cache_check(name, *scenario)
