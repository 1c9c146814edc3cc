"""The migration planner against brute force on small random clusters (hypothesis).

By hand, from the objects: which pods may move (GPU pods smaller than the pending pod,
at or below its level and medium, not writing a checkpoint, within their budgets'
``disruptionsAllowed``), and every way of moving up to ``max_moves`` of them off one
node to the others (each node's GPUs and CPUs summed). The planner's migration must be
valid by that count — its moved pods fit where it puts them, the pending pod fits on
the node they leave — and exactly as small as the smallest valid one; where none
exists (or the pod fits already) it must refuse."""

from __future__ import annotations

from itertools import combinations, product
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from coordinator.config import DefragSettings
from coordinator.consolidation.defrag import Migration, plan_migration
from tests.coordinator.consolidation.drainrig import pod
from tests.coordinator.eviction.evictrig import NOW, EvictRig, node, pdb, roomy_caps

CPU_M = 16_000
MAX_MOVES = 3
DEFRAG = DefragSettings(max_moves=MAX_MOVES)
LEVEL = {0: 1, 1_000: 2, 10_000: 3}
"""Priority → level (low, medium, high) by the default ``level_min_priority``."""

Case = tuple[list[dict], list[dict], list[dict], dict]


@st.composite
def clusters(draw: Any) -> Case:
    count = draw(st.integers(2, 4))
    gpus = {f"n{k}": draw(st.sampled_from([4, 4, 8])) for k in range(count)}
    nodes = [node(n, cpu="16", memory="64Gi", gpus=g) for n, g in gpus.items()]
    pods = []
    for where, g in gpus.items():  # each node filled but for 0-3 GPUs: fragmented
        used, cpu_used = 0, 0
        left = draw(st.integers(0, 3))
        while used < g - left and len(pods) < 10:
            want = min(draw(st.sampled_from([1, 1, 2, 3])), g - left - used)
            cpu = draw(st.sampled_from([1_000, 2_000, 4_000]))
            if cpu_used + cpu > CPU_M:
                break
            used += want
            cpu_used += cpu
            notes = {"stowage.io/checkpointing": "true"} if draw(st.integers(0, 6)) == 0 else {}
            app = draw(st.sampled_from(["a", "b", None]))
            pods.append(
                pod(
                    f"p{len(pods)}",
                    node=where,
                    gpus=want,
                    cpu=f"{cpu}m",
                    memory="1Gi",
                    priority=draw(st.sampled_from([0, 0, 1_000, 1_000, 10_000])),
                    labels={"app": app} if app else {},
                    annotations=notes,
                )
            )
    budgets = [
        pdb(f"b-{app}", {"app": app}, allowed=draw(st.integers(0, 2)))
        for app in ("a", "b")
        if draw(st.booleans())
    ]
    want = draw(st.sampled_from([2, 3, 4, 4]))
    cpu = draw(st.sampled_from([1_000, 4_000]))
    priority = draw(st.sampled_from([0, 1_000, 1_000, 10_000]))
    waiting = pod("big", gpus=want, cpu=f"{cpu}m", memory="1Gi", priority=priority)
    return nodes, pods, budgets, waiting


def need(p: dict) -> tuple[int, int]:
    """(CPU milli, GPUs) a pod object requests, read by hand."""
    resources = p["spec"]["containers"][0]["resources"]
    cpu = int(resources["requests"]["cpu"].removesuffix("m"))
    return cpu, int(resources.get("limits", {}).get("nvidia.com/gpu", 0))


def capacity(nodes: list[dict]) -> dict[str, tuple[int, int]]:
    return {
        n["metadata"]["name"]: (CPU_M, int(n["status"]["allocatable"]["nvidia.com/gpu"]))
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


def movable(p: dict, waiting: dict) -> bool:
    ceiling = min(LEVEL[waiting["spec"]["priority"]], 2)
    return (
        0 < need(p)[1] < need(waiting)[1]
        and LEVEL[p["spec"]["priority"]] <= ceiling
        and p["metadata"]["annotations"].get("stowage.io/checkpointing") != "true"
    )


def within_budgets(moved: list[dict], budgets: list[dict]) -> bool:
    for b in budgets:
        ((key, value),) = b["spec"]["selector"]["matchLabels"].items()
        spent = sum(1 for p in moved if p["metadata"]["labels"].get(key) == value)
        if spent > b["status"]["disruptionsAllowed"]:
            return False
    return True


def valid(target: str, homes: dict[str, str], case: Case) -> bool:
    """Whether moving each pod of ``homes`` (name → destination) off ``target`` fits,
    with the pending pod on ``target``."""
    nodes, pods, _, waiting = case
    at = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    if any(d == target or at[n] != target for n, d in homes.items()):
        return False
    return fits({**at, **homes, "big": target}, [*pods, waiting], nodes)


def smallest(case: Case) -> int | None:
    """Brute force: the fewest pods a valid migration moves; None when none does."""
    nodes, pods, budgets, waiting = case
    names = sorted(capacity(nodes))
    for size in range(1, MAX_MOVES + 1):
        for target in names:
            here = [p for p in pods if p["spec"]["nodeName"] == target and movable(p, waiting)]
            for moved in combinations(here, size):
                if not within_budgets(list(moved), budgets):
                    continue
                others = [n for n in names if n != target]
                for choice in product(others, repeat=size):
                    homes = {p["metadata"]["name"]: d for p, d in zip(moved, choice, strict=True)}
                    if valid(target, homes, case):
                        return size
    return None


def fits_now(case: Case) -> bool:
    nodes, pods, _, waiting = case
    at = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    return any(fits({**at, "big": n}, [*pods, waiting], nodes) for n in capacity(nodes))


def check(case: Case) -> None:
    nodes, pods, budgets, waiting = case
    rig = EvictRig(settings=roomy_caps()).nodes(*nodes).pods(*pods, waiting).budgets(*budgets)
    answer = plan_migration(rig.view(), rig.facts(waiting), DEFRAG, rig.evictions, NOW)
    best = None if fits_now(case) else smallest(case)
    event("fits now" if fits_now(case) else f"smallest {best}")
    if best is None:
        assert not isinstance(answer, Migration), (answer, case)
        return
    assert isinstance(answer, Migration), (answer, best)
    by_name = {p["metadata"]["name"]: p for p in pods}
    homes = {m.pod.removeprefix("ns/"): m.destination for m in answer.moves}
    assert all(movable(by_name[n], waiting) for n in homes)
    assert within_budgets([by_name[n] for n in homes], budgets)
    assert valid(answer.node, homes, case), (answer, case)
    assert len(homes) == best


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_migrations_fit_keep_every_rule_and_are_the_smallest(case: Case) -> None:
    check(case)


@pytest.mark.slow
@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_migrations_against_brute_force_at_length(case: Case) -> None:
    check(case)
