"""The planner against brute force on small clusters (hypothesis): over every subset of
the running pods, the smallest valid set of victims — each rule checked here by hand,
the fit by a live cluster rebuilt without the victims and asked through the filter
endpoint's own path — is never smaller than the plan, and every plan keeps every rule."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coordinator.eviction.answers import Plan, Refusal
from coordinator.eviction.plan import plan_preemption
from tests.coordinator.eviction.evictrig import NOW, EvictRig, node, pdb, pod, roomy_caps

LEVEL_OF_PRIORITY = {0: 1, 1_000: 2, 10_000: 3, 2_000_000_000: 4}
"""Levels worked out by hand from the default thresholds."""
GPU_NODE = {"cpu": 16_000, "gpus": 8}


@st.composite
def clusters(draw: Any) -> tuple[list[dict], list[dict], list[dict], dict]:
    count = draw(st.integers(1, 4))
    nodes = [
        node(f"n{k}", cpu="16", memory="64Gi", gpus=draw(st.sampled_from([4, 8])))
        for k in range(count)
    ]
    free = {
        n["metadata"]["name"]: [16_000, int(n["status"]["allocatable"]["nvidia.com/gpu"])]
        for n in nodes
    }
    pods = []
    places = [name for name in sorted(free) for _ in range(draw(st.integers(1, 3)))]
    for k, where in enumerate(places[:10]):  # brute force tries every subset: 1,024 at most
        gpus = draw(st.sampled_from([0, 1, 2, 2, 4]))
        cpu = draw(st.sampled_from([1_000, 2_000, 4_000, 8_000]))
        if free[where][0] < cpu or free[where][1] < gpus:
            continue
        free[where][0] -= cpu
        free[where][1] -= gpus
        notes: dict[str, str] = {}
        if draw(st.integers(0, 6)) == 0:
            notes["stowage.io/checkpointing"] = "true"
        if draw(st.booleans()):
            notes["stowage.io/last-checkpoint"] = str(NOW - draw(st.integers(0, 5000)))
        if draw(st.booleans()):
            notes["scheduling.k8s.io/group-name"] = "g"
            notes["stowage.io/gang-min-member"] = "2"
        labels = {
            key: value
            for key, value in (
                ("app", draw(st.sampled_from(["a", "b", None]))),
                ("tier", draw(st.sampled_from(["t", None]))),
            )
            if value
        }
        pods.append(
            pod(
                f"p{k}",
                node=where,
                gpus=gpus,
                cpu=f"{cpu}m",
                memory="1Gi",
                priority=draw(st.sampled_from([0, 0, 1_000, 10_000])),
                labels=labels,
                annotations=notes,
            )
        )
    budgets = [
        pdb(f"b-{value}", {key: value}, allowed=draw(st.integers(0, 2)))
        for key, value in (("app", "a"), ("app", "b"), ("tier", "t"))
        if draw(st.booleans())
    ]
    wants = pod(
        "want",
        gpus=draw(st.sampled_from([4, 8, 8])),
        cpu=f"{draw(st.sampled_from([4_000, 8_000, 12_000]))}m",
        memory="1Gi",
        priority=draw(st.sampled_from([10_000, 2_000_000_000])),
    )
    return nodes, pods, budgets, wants


def rules_hold(victims: set[str], pods: list[dict], budgets: list[dict], wants: dict) -> bool:
    """Every rule, by hand: levels two apart, none checkpointing, none under two budgets,
    no budget overdrawn, and no gang left below its minMember (the caps per cycle are
    set roomy here: they are tested on their own)."""
    by_name = {p["metadata"]["name"]: p for p in pods}
    displacer = LEVEL_OF_PRIORITY[wants["spec"]["priority"]]
    gang = [
        n
        for n, p in by_name.items()
        if p["metadata"]["annotations"].get("scheduling.k8s.io/group-name")
    ]
    for name in victims:
        p = by_name[name]
        if displacer - LEVEL_OF_PRIORITY[p["spec"]["priority"]] < 2:
            return False
        if p["metadata"]["annotations"].get("stowage.io/checkpointing") == "true":
            return False
        if sum(1 for b in budgets if covers(b, p)) > 1:
            return False
    for b in budgets:
        spent = sum(1 for n in victims if covers(b, by_name[n]))
        if spent > b["status"]["disruptionsAllowed"]:
            return False
    gone = len(victims & set(gang))
    return not (gone and len(gang) - gone < 2 and not set(gang) <= victims)


def covers(budget: dict, p: dict) -> bool:
    ((key, value),) = budget["spec"]["selector"]["matchLabels"].items()
    return p["metadata"]["labels"].get(key) == value


def fits_after(nodes: list[dict], pods: list[dict], victims: set[str], wants: dict) -> set[str]:
    """Nodes where the filter passes the pod once ``victims`` are gone: a live cluster
    without them, asked as the filter endpoint asks."""
    rig = EvictRig().nodes(*nodes).pods(*(p for p in pods if p["metadata"]["name"] not in victims))
    names = [n["metadata"]["name"] for n in nodes]
    return set(rig.cluster.filter(rig.facts(wants).request, names).passing)


def levels(victims: set[str], pods: list[dict]) -> int:
    return sum(
        LEVEL_OF_PRIORITY[p["spec"]["priority"]] for p in pods if p["metadata"]["name"] in victims
    )


def check(case: tuple[list[dict], list[dict], list[dict], dict]) -> None:
    nodes, pods, budgets, wants = case
    rig = EvictRig(settings=roomy_caps()).nodes(*nodes).pods(*pods).budgets(*budgets)
    result = plan_preemption(rig.view(), rig.facts(wants), rig.evictions, NOW)
    if fits_after(nodes, pods, set(), wants):
        assert isinstance(result, Refusal) and "without evicting anyone" in result.reason
        return
    names = [p["metadata"]["name"] for p in pods]
    smallest: tuple[int, int] | None = None
    for size in range(1, len(names) + 1):
        for chosen in combinations(names, size):
            victims = set(chosen)
            if rules_hold(victims, pods, budgets, wants) and fits_after(
                nodes, pods, victims, wants
            ):
                key = (size, levels(victims, pods))
                smallest = key if smallest is None else min(smallest, key)
        if smallest is not None:
            break
    if smallest is None:
        assert isinstance(result, Refusal), result
        return
    assert isinstance(result, Plan), (result, smallest)
    victims = {v.name for v in result.victims}
    assert (len(victims), levels(victims, pods)) == smallest
    assert rules_hold(victims, pods, budgets, wants)
    assert result.node in fits_after(nodes, pods, victims, wants)


GANG = {"scheduling.k8s.io/group-name": "g", "stowage.io/gang-min-member": "2"}
SPLIT_GANG = (
    [node("n0", cpu="16", memory="64Gi"), node("n1", cpu="16", memory="64Gi")],
    [
        pod("g0", node="n0", gpus=8, memory="1Gi", annotations=GANG),
        pod("g1", node="n1", gpus=4, memory="1Gi", annotations=GANG),
        pod("x", node="n1", gpus=4, memory="1Gi", priority=1_000),
    ],
    [],
    pod("want", gpus=8, cpu="4", memory="1Gi", priority=10_000),
)
"""Freeing n0 breaks the gang: both members go."""
TWO_BUDGETS = (
    [node("n0", cpu="16", memory="64Gi")],
    [pod("p", node="n0", gpus=8, memory="1Gi", labels={"app": "a", "tier": "t"})],
    [pdb("b-a", {"app": "a"}, allowed=2), pdb("b-t", {"tier": "t"}, allowed=2)],
    pod("want", gpus=8, cpu="4", memory="1Gi", priority=10_000),
)
"""The only pod that could go is under two budgets: no plan."""


@example(SPLIT_GANG)
@example(TWO_BUDGETS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_plans_are_the_smallest_valid_sets_and_keep_every_rule(case: Any) -> None:
    check(case)


@pytest.mark.slow
@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_plans_are_the_smallest_valid_sets_at_length(case: Any) -> None:
    check(case)
