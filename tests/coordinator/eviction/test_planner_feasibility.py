"""The planner and the preempt verb judge fit by kube-scheduler's filters too
(:mod:`coordinator.feasibility`), not by resources alone: no plan evicts pods for a
preemptor that could not land on the freed node, and none is made for a pod that may
not preempt."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.config import CoordinatorSettings, EvictionSettings, PolicySettings
from coordinator.eviction.answers import Plan, Refusal
from coordinator.eviction.plan import narrow_victims, plan_preemption
from tests.coordinator.eviction.evictrig import NOW, EvictRig, node, pod

CRITICAL = 1_000_000_000


def full(*names: str, **node_fields: Any) -> EvictRig:
    """Nodes ``names`` (8 GPUs each), each full with one low 8-GPU pod ``low-<node>``;
    ``node_fields`` maps a node to the spec fields to set on it."""
    rig = EvictRig()
    for name in names:
        obj = node(name)
        obj["spec"] = node_fields.get(name, {})
        rig.nodes(obj)
        rig.pods(pod(f"low-{name}", node=name, gpus=8))
    return rig


def pending(**spec: Any) -> dict[str, Any]:
    obj = pod("want", gpus=8, priority=CRITICAL)
    obj["spec"].update(spec)
    return obj


def planned_node(rig: EvictRig, wants: dict[str, Any]) -> str | Refusal:
    outcome = plan_preemption(rig.view(), rig.facts(wants), rig.evictions, NOW)
    return outcome.node if isinstance(outcome, Plan) else outcome


# ---------------------------------------------------------------- finding 1


def test_no_plan_for_a_pod_with_preemption_policy_never() -> None:
    outcome = planned_node(full("a"), pending(preemptionPolicy="Never"))
    assert isinstance(outcome, Refusal) and "Never" in outcome.reason


def test_no_plan_for_a_gated_pod() -> None:
    outcome = planned_node(full("a"), pending(schedulingGates=[{"name": "quota"}]))
    assert isinstance(outcome, Refusal) and "gate" in outcome.reason


def test_the_plan_goes_where_the_node_selector_points() -> None:
    rig = full("a", "b")
    rig.nodes(
        {
            **node("b"),
            "metadata": {
                **node("b")["metadata"],
                "labels": {**node("b")["metadata"]["labels"], "pool": "train"},
            },
        }
    )
    assert planned_node(rig, pending(nodeSelector={"pool": "train"})) == "b"
    outcome = planned_node(rig, pending(nodeSelector={"pool": "nowhere"}))
    assert isinstance(outcome, Refusal)


def test_the_plan_skips_nodes_with_taints_the_pod_does_not_tolerate() -> None:
    taint = {"taints": [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]}
    rig = full("a", "b", a=taint)
    assert planned_node(rig, pending()) == "b"
    tolerant = pending(tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert planned_node(rig, tolerant) == "a"  # the first by name, all else equal


def test_the_plan_skips_cordoned_nodes() -> None:
    rig = full("a", "b", a={"unschedulable": True})
    assert planned_node(rig, pending()) == "b"
    rig = full("a", a={"unschedulable": True})
    assert isinstance(planned_node(rig, pending()), Refusal)


def test_a_host_port_in_use_is_freed_by_evicting_its_holder() -> None:
    """Stowage's filter passes the pod (it needs no GPU), but the node's only host port
    8080 is held: kube-scheduler would refuse it, so the holder is the victim."""
    rig = EvictRig().nodes(node("a"))
    holder = pod("holder", node="a", cpu="1")
    holder["spec"]["containers"][0]["ports"] = [{"containerPort": 1, "hostPort": 8080}]
    rig.pods(holder, pod("bystander", node="a", cpu="1"))
    wants = pod("want", cpu="1", priority=CRITICAL)
    wants["spec"]["containers"][0]["ports"] = [{"containerPort": 1, "hostPort": 8080}]
    outcome = plan_preemption(rig.view(), rig.facts(wants), rig.evictions, NOW)
    assert isinstance(outcome, Plan)
    assert [v.name for v in outcome.victims] == ["holder"]


def test_a_pod_with_a_volume_claim_gets_no_plan() -> None:
    claim = pending(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
    outcome = planned_node(full("a"), claim)
    assert isinstance(outcome, Refusal) and "volume" in outcome.reason


# ---------------------------------------------------------------- finding 2


def proposal(rig: EvictRig) -> dict[str, frozenset[str]]:
    return {"a": frozenset({"uid-ns-low-a"})}


def test_the_verb_answers_nothing_while_the_queue_cools_down() -> None:
    rig = full("a")
    wants = rig.facts(pending())
    assert narrow_victims(rig.view(), wants, proposal(rig), rig.evictions, NOW)
    cooling = rig.view(cooldown_until={"ns": NOW + 60})
    refused = narrow_victims(cooling, wants, proposal(rig), rig.evictions, NOW)
    assert isinstance(refused, Refusal) and "queue ns is cooling down" in refused.reason


def test_the_verb_answers_nothing_for_a_queue_whose_plans_need_approval() -> None:
    settings = CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"),
        evictions=EvictionSettings(queue_weights={"ns": 90}, approval_weight_above=50),
    )
    rig = EvictRig(settings=settings)
    rig.nodes(node("a")).pods(pod("low-a", node="a", gpus=8))
    wants = rig.facts(pending())
    refused = narrow_victims(rig.view(), wants, proposal(rig), rig.evictions, NOW)
    assert isinstance(refused, Refusal) and "approval" in refused.reason


@pytest.mark.parametrize("spec", [{"preemptionPolicy": "Never"}, {"unschedulable": True}])
def test_the_verb_judges_by_the_same_model(spec: dict[str, Any]) -> None:
    node_spec = {"unschedulable": True} if "unschedulable" in spec else {}
    rig = full("a", a=node_spec)
    wants = rig.facts(pending(**({} if node_spec else spec)))
    answer = narrow_victims(rig.view(), wants, proposal(rig), rig.evictions, NOW)
    if node_spec:  # the node is dropped; the pod could preempt elsewhere
        assert answer == {}
    else:  # the pod may preempt nowhere
        assert answer == Refusal("ns/want has preemptionPolicy Never")


def test_a_port_holder_freeing_no_resource_the_pod_lacks_is_still_weighed() -> None:
    """The pod lacks GPUs there (the 8-GPU pod goes) and the port (its CPU-only holder
    goes too): both are victims, though the holder frees no GPU."""
    rig = full("a")
    holder = pod("holder", node="a", cpu="1")
    holder["spec"]["containers"][0]["ports"] = [{"containerPort": 1, "hostPort": 8080}]
    rig.pods(holder)
    wants = pending()
    wants["spec"]["containers"][0]["ports"] = [{"containerPort": 1, "hostPort": 8080}]
    outcome = plan_preemption(rig.view(), rig.facts(wants), rig.evictions, NOW)
    assert isinstance(outcome, Plan)
    assert sorted(v.name for v in outcome.victims) == ["holder", "low-a"]


# ---------------------------------------------------------------- finding 6


def capped(**caps: int) -> EvictRig:
    settings = CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"), evictions=EvictionSettings(**caps)
    )
    return EvictRig(settings=settings)


def test_a_plan_the_caps_could_never_let_through_is_revised_to_one_they_do() -> None:
    """Node a's two low pods are the cheapest set, but both are in namespace one, and a
    cycle evicts at most one pod a namespace: held back every cycle, that plan would never
    run. The plan is node b's two medium pods, one in each namespace."""
    rig = capped(max_per_namespace_per_cycle=1).nodes(node("a"), node("b"))
    rig.pods(
        pod("low-1", node="a", gpus=4, namespace="one"),
        pod("low-2", node="a", gpus=4, namespace="one"),
        pod("mid-1", node="b", gpus=4, namespace="one", priority=1_000),
        pod("mid-2", node="b", gpus=4, namespace="two", priority=1_000),
    )
    outcome = plan_preemption(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(outcome, Plan) and outcome.node == "b"


@pytest.mark.parametrize(
    "caps", [{"max_per_cycle": 1}, {"max_per_node_per_cycle": 1}, {"eviction_burst": 1}]
)
def test_no_plan_when_no_set_fits_the_caps(caps: dict[str, int]) -> None:
    rig = capped(**caps).nodes(node("a"))
    rig.pods(pod("low-1", node="a", gpus=4), pod("low-2", node="a", gpus=4))
    outcome = plan_preemption(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(outcome, Refusal)
    roomy = capped().nodes(node("a"))
    roomy.pods(pod("low-1", node="a", gpus=4), pod("low-2", node="a", gpus=4))
    assert isinstance(
        plan_preemption(roomy.view(), roomy.facts(pending()), roomy.evictions, NOW), Plan
    )
