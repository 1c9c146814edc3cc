"""The drain planner against brute force on small random clusters (hypothesis): every
drain it plans moves pods that all fit where it puts them — checked here by hand, with
each node's requests summed after every drain of the plan — keeps every rule, and
exists only when some assignment of the drained pods to the remaining nodes fits
(tried exhaustively). Where the node to drain holds one pod, greedy placement is exact:
then the planner drains it whenever brute force finds a home for that pod."""

from __future__ import annotations

from itertools import product
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.config import DrainSettings
from coordinator.consolidation.drain import DrainPlan, plan_drains
from tests.coordinator.consolidation.drainrig import pod
from tests.coordinator.eviction.evictrig import NOW, EvictRig, node, pdb, roomy_caps

CPU_M = 16_000
DRAIN = DrainSettings(max_draining=4, budgets=())


@st.composite
def clusters(draw: Any) -> tuple[list[dict], list[dict], list[dict], list[str]]:
    count = draw(st.integers(2, 4))
    gpus = {f"n{k}": draw(st.sampled_from([0, 4, 8])) for k in range(count)}
    nodes = [node(n, cpu="16", memory="64Gi", gpus=g) for n, g in gpus.items()]
    free = {n: [CPU_M, g] for n, g in gpus.items()}
    pods = []
    for k in range(draw(st.integers(1, 7))):
        where = draw(st.sampled_from(sorted(free)))
        cpu = draw(st.sampled_from([1_000, 2_000, 4_000, 8_000]))
        want = draw(st.sampled_from([0, 0, 1, 2, 4]))
        if free[where][0] < cpu or free[where][1] < want:
            continue
        free[where][0] -= cpu
        free[where][1] -= want
        notes: dict[str, str] = {}
        if draw(st.integers(0, 6)) == 0:
            notes["stowage.io/checkpointing"] = "true"
        if draw(st.integers(0, 3)) == 0:
            notes["scheduling.k8s.io/group-name"] = "g"
            notes["stowage.io/gang-min-member"] = "2"
        app = draw(st.sampled_from(["a", "b", None]))
        pods.append(
            pod(
                f"p{k}",
                node=where,
                gpus=want,
                cpu=f"{cpu}m",
                memory="1Gi",
                priority=draw(st.sampled_from([0, 0, 1_000, 10_000])),
                labels={"app": app} if app else {},
                annotations=notes,
            )
        )
    budgets = [
        pdb(f"b-{app}", {"app": app}, allowed=draw(st.integers(0, 2)))
        for app in ("a", "b")
        if draw(st.booleans())
    ]
    candidates = draw(st.lists(st.sampled_from(sorted(free)), min_size=1, max_size=count))
    return nodes, pods, budgets, candidates


def need(p: dict) -> tuple[int, int]:
    """(CPU milli, GPUs) a pod object requests, read by hand."""
    resources = p["spec"]["containers"][0]["resources"]
    cpu = int(resources["requests"]["cpu"].removesuffix("m"))
    return cpu, int(resources.get("limits", {}).get("nvidia.com/gpu", 0))


def capacity(nodes: list[dict]) -> dict[str, tuple[int, int]]:
    return {
        n["metadata"]["name"]: (CPU_M, int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)))
        for n in nodes
    }


def fits(placement: dict[str, str], pods: list[dict], nodes: list[dict]) -> bool:
    """Whether every node holds no more than it has, pods at ``placement`` (name → node)."""
    used = {n: [0, 0] for n in capacity(nodes)}
    for p in pods:
        cpu, gpus = need(p)
        where = placement[p["metadata"]["name"]]
        used[where][0] += cpu
        used[where][1] += gpus
    return all(used[n][0] <= c and used[n][1] <= g for n, (c, g) in capacity(nodes).items())


def some_home(moving: list[str], drained: set[str], pods: list[dict], nodes: list[dict]) -> bool:
    """Brute force: whether any assignment of ``moving`` to nodes not ``drained`` fits."""
    homes = sorted(set(capacity(nodes)) - drained)
    at = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    for choice in product(homes, repeat=len(moving)):
        trial = {**at, **dict(zip(moving, choice, strict=True))}
        if fits(trial, pods, nodes):
            return True
    return False


def rules_hold(moved: set[str], pods: list[dict], budgets: list[dict]) -> bool:
    """Every rule, by hand: nothing above medium (priority under 10,000), none
    checkpointing, none under two budgets, no budget overdrawn, and a gang left below its
    minMember only when all of it moves."""
    by_name = {p["metadata"]["name"]: p for p in pods}
    gang = {n for n, p in by_name.items() if p["metadata"]["annotations"].get(GANG_KEY)}
    for name in moved:
        p = by_name[name]
        if p["spec"]["priority"] >= 10_000:
            return False
        if p["metadata"]["annotations"].get("stowage.io/checkpointing") == "true":
            return False
    for b in budgets:
        ((key, value),) = b["spec"]["selector"]["matchLabels"].items()
        spent = sum(1 for n in moved if by_name[n]["metadata"]["labels"].get(key) == value)
        if spent > b["status"]["disruptionsAllowed"]:
            return False
    gone = len(moved & gang)
    return not (gone and len(gang) - gone < 2 and not gang <= moved)


GANG_KEY = "scheduling.k8s.io/group-name"


def check(case: tuple[list[dict], list[dict], list[dict], list[str]]) -> None:
    nodes, pods, budgets, candidates = case
    rig = EvictRig(settings=roomy_caps()).nodes(*nodes).pods(*pods).budgets(*budgets)
    result: DrainPlan = plan_drains(rig.view(), candidates, DRAIN, rig.evictions, NOW)
    drained = {d.node for d in result.drains}
    assert drained <= set(candidates)
    placement = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    moved: set[str] = set()
    for drain in result.drains:
        on_node = {p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] == drain.node}
        assert {m.pod.removeprefix("ns/") for m in drain.moves} == on_node
        for m in drain.moves:
            assert m.destination not in drained
            placement[m.pod.removeprefix("ns/")] = m.destination
            moved.add(m.pod.removeprefix("ns/"))
    assert fits(placement, pods, nodes), (result, placement)
    assert some_home(sorted(moved), drained, pods, nodes)
    assert rules_hold(moved, pods, budgets)
    for blocked in result.blocked:
        on_node = [p for p in pods if p["spec"]["nodeName"] == blocked.node]
        if len(on_node) != 1 or result.drains or len(set(candidates)) != 1:
            continue
        name = on_node[0]["metadata"]["name"]
        if rules_hold({name}, pods, budgets) and not on_node[0]["metadata"]["annotations"]:
            assert not some_home([name], {blocked.node}, pods, nodes), blocked


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_drains_fit_keep_every_rule_and_exist_only_where_brute_force_finds_homes(
    case: Any,
) -> None:
    check(case)


@pytest.mark.slow
@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_drains_against_brute_force_at_length(case: Any) -> None:
    check(case)
