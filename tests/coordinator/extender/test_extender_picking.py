"""Filter answers Stowage's first choice alone when nothing else would tell the passing
nodes apart, and every passing node when kube-scheduler's scoring has a say."""

from __future__ import annotations

from typing import Any

from coordinator.config import CoordinatorSettings, ExtenderSettings, PolicySettings
from coordinator.extender.picking import soft_preference
from tests.coordinator.extender.conftest import MakeRig, Rig
from tests.coordinator.extender.kubejson import NODES, POD_UID, pod

FILTER = "/scheduler/filter"
PICKING = CoordinatorSettings(policy=PolicySettings(name="most-allocated"))
OFFERED = ["node-a", "node-b", "node-c"]


async def picking_rig(make_rig: MakeRig) -> Rig:
    """node-a (8 CPUs) already half used: MostAllocated ranks it first for a 2-CPU pod."""
    rig = await make_rig(PICKING, nodes=OFFERED)
    rig.cluster.upsert_pod(
        {
            **pod("4", "16Gi", name="resident", uid="uid-resident"),
            "spec": {**pod("4", "16Gi")["spec"], "nodeName": "node-a"},
            "status": {"phase": "Running"},
        }
    )
    return rig


async def filtered(rig: Rig, body: dict[str, Any]) -> list[str]:
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    return list(reply["NodeNames"])


async def test_filter_answers_the_first_choice_alone_and_assumes_it(make_rig: MakeRig) -> None:
    rig = await picking_rig(make_rig)
    assert await filtered(rig, {"Pod": pod(), "NodeNames": OFFERED}) == ["node-a"]
    held = rig.cluster.held[POD_UID]
    assert held.node == "node-a" and held.assumed_until is not None


async def test_the_choice_is_among_the_nodes_that_passed(make_rig: MakeRig) -> None:
    """A 10-CPU pod cannot go to node-a (8 CPUs): the pick is among node-b and node-c."""
    rig = await picking_rig(make_rig)
    assert await filtered(rig, {"Pod": pod("10"), "NodeNames": OFFERED}) == ["node-b"]


async def test_switched_off_every_passing_node_is_answered(make_rig: MakeRig) -> None:
    settings = CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"),
        extender=ExtenderSettings(pick_in_filter=False),
    )
    rig = await make_rig(settings, nodes=OFFERED)
    assert await filtered(rig, {"Pod": pod(), "NodeNames": OFFERED}) == OFFERED
    assert POD_UID not in rig.cluster.held


async def test_without_an_opinion_kube_scheduler_decides(make_rig: MakeRig) -> None:
    """Nodes Stowage does not know score 0: no pick."""
    rig = await picking_rig(make_rig)
    names = ["new-1", "new-2"]
    assert await filtered(rig, {"Pod": pod(), "NodeNames": names}) == names


async def test_a_pod_without_uid_is_not_picked_for(make_rig: MakeRig) -> None:
    """Nothing could be assumed for it, and prioritize must follow."""
    rig = await picking_rig(make_rig)
    anonymous = pod()
    del anonymous["metadata"]["uid"]
    assert await filtered(rig, {"Pod": anonymous, "NodeNames": OFFERED}) == OFFERED


SOFT = {
    "preferred node affinity": {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": {"matchExpressions": []}}
                    ]
                }
            }
        }
    },
    "preferred pod anti-affinity": {
        "spec": {
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}
                    ]
                }
            }
        }
    },
    "soft spreading": {
        "spec": {
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
            ]
        }
    },
    "a ReplicaSet's pod": {
        "metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9", "uid": "u"}]}
    },
}


def with_(extra: dict[str, Any]) -> dict[str, Any]:
    body = pod()
    for part, fields in extra.items():
        body[part] = {**body[part], **fields}
    return body


async def test_soft_placement_rules_keep_every_passing_node(make_rig: MakeRig) -> None:
    rig = await picking_rig(make_rig)
    for what, extra in SOFT.items():
        assert soft_preference(with_(extra)) is not None, what
        assert await filtered(rig, {"Pod": with_(extra), "NodeNames": OFFERED}) == OFFERED, what


def test_hard_rules_and_jobs_leave_the_choice_to_stowage() -> None:
    hard = with_(
        {
            "spec": {
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "metadata": {"ownerReferences": [{"kind": "Job", "name": "train", "uid": "u"}]},
        }
    )
    assert soft_preference(hard) is None
    assert soft_preference(pod()) is None


async def test_a_prefer_no_schedule_node_keeps_every_passing_node(make_rig: MakeRig) -> None:
    rig = await picking_rig(make_rig)
    tainted = {**NODES["node-c"], "spec": {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}}
    rig.cluster.upsert_node(tainted)
    assert await filtered(rig, {"Pod": pod(), "NodeNames": OFFERED}) == OFFERED
    rig.cluster.upsert_node(NODES["node-c"])  # the taint is gone
    assert await filtered(rig, {"Pod": pod(), "NodeNames": OFFERED}) == ["node-a"]
    rig.cluster.replace_nodes([NODES[n] for n in OFFERED[:2]] + [tainted])
    assert await filtered(rig, {"Pod": pod(), "NodeNames": OFFERED}) == OFFERED
    rig.cluster.remove_node("node-c")
    assert await filtered(rig, {"Pod": pod(), "NodeNames": OFFERED}) == ["node-a"]


async def test_a_node_refused_by_its_report_is_never_the_pick(make_rig: MakeRig) -> None:
    """node-a ranks first on resources, but its agent reports too little contiguous
    memory for this pod: filter fails it, and the pick is the next best."""
    rig = await picking_rig(make_rig)
    rig.cluster.upsert_pod(
        {
            **pod("8", "32Gi", name="resident-b", uid="uid-resident-b"),
            "spec": {**pod("8", "32Gi")["spec"], "nodeName": "node-b"},
            "status": {"phase": "Running"},
        }
    )
    rig.set_signals("node-a", contiguous_2mib_b=100 * 2**20)
    contiguous = pod(annotations={"stowage.io/needs-contiguous-memory": "true"})
    status, reply = await rig.post(FILTER, {"Pod": contiguous, "NodeNames": OFFERED})
    assert status == 200
    assert reply["NodeNames"] == ["node-b"]
    assert set(reply["FailedNodes"]) == {"node-a"}
