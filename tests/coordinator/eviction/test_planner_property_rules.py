"""The planner against brute force on small random clusters with kube-scheduler's
constraints as well (hypothesis): taints and tolerations, node selectors, host ports,
anti-affinity and topology spread (per node, ``kubernetes.io/hostname``, where only the
pods of the node itself can change the answer, as for upstream preemption), and gangs.

Over every subset of the running pods, the smallest set that keeps every rule and after
whose eviction both Stowage's filter (a live cluster rebuilt without the victims) and the
feasibility model (asked of the raw objects) pass the pod is never smaller than the
plan; and no plan is made whose preemptor would not fit."""

from __future__ import annotations

from itertools import combinations
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator import feasibility
from coordinator.eviction.answers import Plan, Refusal
from coordinator.eviction.plan import plan_preemption
from tests.coordinator.eviction.evictrig import NOW, EvictRig, roomy_caps
from tests.coordinator.eviction.test_planner_property import clusters, levels, rules_hold

HOST = "kubernetes.io/hostname"
TAINT = {"key": "dedicated", "value": "train", "effect": "NoSchedule"}
PORT = [{"containerPort": 1, "hostPort": 8080}]


@st.composite
def constrained(draw: Any) -> tuple[list[dict], list[dict], list[dict], dict]:
    nodes, pods, budgets, wants = draw(clusters())
    for n in nodes:
        n["spec"] = {"taints": [TAINT]} if draw(st.integers(0, 3)) == 0 else {}
        if draw(st.booleans()):
            n["metadata"]["labels"]["pool"] = "x"
    for p in pods:
        if draw(st.integers(0, 3)) == 0:
            p["spec"]["containers"][0]["ports"] = PORT
    spec = wants["spec"]
    wants["metadata"]["labels"] = {"app": "a"}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if draw(st.integers(0, 2)) == 0:
        spec["nodeSelector"] = {"pool": "x"}
    if draw(st.integers(0, 2)) == 0:
        spec["containers"][0]["ports"] = PORT
    if draw(st.integers(0, 2)) == 0:
        term = {"labelSelector": {"matchLabels": {"app": "b"}}, "topologyKey": HOST}
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    if draw(st.integers(0, 2)) == 0:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": HOST,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "a"}},
            }
        ]
    return nodes, pods, budgets, wants


def fits_after(nodes: list[dict], pods: list[dict], victims: set[str], wants: dict) -> set[str]:
    """Nodes where both filters pass the pod once ``victims`` are gone."""
    staying = [p for p in pods if p["metadata"]["name"] not in victims]
    rig = EvictRig().nodes(*nodes).pods(*staying)
    names = [n["metadata"]["name"] for n in nodes]
    passing = set(rig.cluster.filter(rig.facts(wants).request, names).passing)
    snapshot = feasibility.Snapshot(
        {n["metadata"]["name"]: feasibility.node_of(n) for n in nodes},
        {(q := feasibility.pod_of(p)).uid: q for p in staying},
    )
    incoming = feasibility.pod_of(wants)
    return {n for n in passing if feasibility.could_run(incoming, n, snapshot).fits}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constrained())
def test_plans_are_the_smallest_sets_after_which_both_filters_pass(case: Any) -> None:
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
    assert result.node in fits_after(nodes, pods, victims, wants)
    assert (len(victims), levels(victims, pods)) == smallest
    assert rules_hold(victims, pods, budgets, wants)
