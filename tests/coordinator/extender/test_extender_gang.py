"""Gang locality through the extender: a gang's members prefer the rack and node where
its other members hold room — bound, or assumed after an earlier answer — for
kube-scheduler and Volcano alike, sized by the PodGroup's ``minMember``; pods of no gang,
or of another namespace's gang of the same name, are scored by the policy alone.

Four nodes of 8 CPUs and 32Gi in two racks (``r1-a``, ``r1-b`` in r1; ``r2-a``, ``r2-b``
in r2); members ask for 2 CPUs and 4Gi, so a node holds 4 of them and a rack 8. The
policy is LeastAllocated, which spreads: whatever gathers the members is the term."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from coordinator import debug
from coordinator.config import CoordinatorSettings, ExtenderSettings, GangSettings, PolicySettings
from coordinator.extender.handling import request_of
from coordinator.scoring import ganglocality
from coordinator.services import SERVICES
from tests.coordinator.extender.conftest import MakeRig, Rig
from tests.coordinator.extender.kubejson import node, pod
from tests.coordinator.extender.test_extender_volcano import node_info, task

PRIORITIZE = "/scheduler/prioritize"
RACK = "example.com/rack"
NAMES = ["r1-a", "r1-b", "r2-a", "r2-b"]
SETTINGS = CoordinatorSettings(
    policy=PolicySettings(name="least-allocated"),
    extender=ExtenderSettings(pick_in_filter=False),
    gang=GangSettings(topology_keys=(RACK,)),
)
LABEL = {"stowage.io/gang": "train"}


def racked(name: str) -> dict[str, Any]:
    found = node(name, "8", "32Gi")
    found["metadata"]["labels"][RACK] = name.split("-")[0]
    return found


async def gang_rig(make_rig: MakeRig, settings: CoordinatorSettings = SETTINGS) -> Rig:
    rig = await make_rig(settings, nodes=())
    for name in NAMES:
        rig.cluster.upsert_node(racked(name))
    return rig


def member(
    name: str,
    node_name: str | None = None,
    *,
    namespace: str = "ns",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A gang member (``stowage.io/gang: train`` unless ``labels`` say otherwise), bound to
    ``node_name`` if given."""
    found = pod(name=name, uid=f"uid-{name}", annotations=annotations)
    found["metadata"]["namespace"] = namespace
    found["metadata"]["labels"] = dict(LABEL if labels is None else labels)
    if node_name is not None:
        found["spec"]["nodeName"] = node_name
        found["status"]["phase"] = "Running"
    return found


async def scores(rig: Rig, the_pod: dict[str, Any]) -> dict[str, int]:
    status, reply = await rig.post(PRIORITIZE, {"Pod": the_pod, "NodeNames": NAMES})
    assert status == 200
    return {r["Host"]: r["Score"] for r in reply}


def best(found: dict[str, int]) -> str:
    return max(found, key=lambda name: found[name])


@pytest.fixture
async def rig(make_rig: MakeRig) -> Rig:
    return await gang_rig(make_rig)


async def test_members_follow_the_member_that_landed(rig: Rig) -> None:
    rig.cluster.upsert_pod(member("w0", "r2-b"))
    found = await scores(rig, member("w1"))
    assert best(found) == "r2-b"  # LeastAllocated alone would take any other node
    assert found["r2-a"] > found["r1-a"]  # the rack holding the gang comes next
    explained = rig.cluster.explain(request_of(member("w1"), rig.services.settings), "r2-a")
    gang = explained["gang"]
    assert (gang["gang"], gang["landed"], gang["weight"]) == ("ns/train", 1, 2.0)
    rack, node_level = gang["levels"][0], gang["levels"][1]
    assert (rack["level"], rack["domain"], rack["landed_here"]) == (RACK, "r2", 1)
    assert rack["gang_domains"] == {"r2": 1}
    assert (node_level["domain"], node_level["landed_here"]) == ("r2-a", 0)
    assert node_level["gang_domains"] == {"r2-b": 1}


async def test_pods_of_no_gang_and_of_another_namespace_are_not_drawn(rig: Rig) -> None:
    rig.cluster.upsert_pod(member("w0", "r2-b"))
    alone = await scores(rig, member("solo", labels={}))
    elsewhere = await scores(rig, member("w1", namespace="other"))
    assert best(alone) == "r1-a"  # the policy's first among the empty nodes
    assert best(elsewhere) == "r1-b"  # and the next: solo was just assumed on r1-a


async def test_a_burst_of_members_follows_the_first_answer(rig: Rig) -> None:
    """The watch has the pending members; no watch event between the calls: the first
    member's assumption says where the gang is."""
    for name in ("w0", "w1"):
        rig.cluster.upsert_pod(member(name))
    assert best(await scores(rig, member("w0"))) == "r1-a"
    assert best(await scores(rig, member("w1"))) == "r1-a"
    assert rig.cluster.held["uid-w1"].node == "r1-a"


async def test_the_podgroups_min_member_sizes_the_room_check(rig: Rig) -> None:
    """One member (Volcano's annotation) on r1-a: r1 holds 7 more. With minMember 4 the 3
    remaining fit there; with 9 the 8 remaining fit only in r2."""
    volcano = {"scheduling.volcano.sh/group-name": "pg"}
    landed = member("w0", "r1-a", labels={}, annotations=volcano)
    rig.cluster.upsert_pod(landed)
    podgroup: dict[str, Any] = {"metadata": {"namespace": "ns", "name": "pg"}, "spec": {}}
    podgroup["spec"]["minMember"] = 4
    rig.cluster.podgroups.upsert(podgroup)
    assert best(await scores(rig, member("w1", labels={}, annotations=volcano))) == "r1-a"
    podgroup["spec"]["minMember"] = 9
    rig.cluster.podgroups.upsert(podgroup)
    found = await scores(rig, member("w1", labels={}, annotations=volcano))
    assert best(found) in ("r2-a", "r2-b")
    assert found["r1-a"] < found["r2-a"]


async def test_volcano_members_follow_the_member_that_landed(rig: Rig) -> None:
    rig.cluster.upsert_pod(member("w0", "r2-b"))
    body = {
        "task": task(member("w1"), 2000, 4 * 2**30),
        "nodes": [node_info(name, racked(name)) for name in NAMES],
    }
    status, reply = await rig.post("/volcano/prioritize", body)
    assert status == 200
    found = reply["nodeScore"]
    assert max(found, key=lambda name: found[name]) == "r2-b"


async def test_off_the_policy_alone_decides(make_rig: MakeRig) -> None:
    off = CoordinatorSettings(
        policy=SETTINGS.policy,
        extender=SETTINGS.extender,
        gang=GangSettings(enabled=False, topology_keys=(RACK,)),
    )
    rig = await gang_rig(make_rig, off)
    rig.cluster.upsert_pod(member("w0", "r2-b"))
    assert best(await scores(rig, member("w1"))) == "r1-a"
    assert "gang" not in rig.cluster.explain(request_of(member("w1"), off), "r2-b")


async def test_a_nominated_member_counts_where_it_is_nominated_but_never_the_pod_itself(
    rig: Rig,
) -> None:
    nominated = member("w0")
    nominated["status"]["nominatedNodeName"] = "r2-b"  # kube-scheduler's preemption
    rig.cluster.upsert_pod(nominated)
    assert best(await scores(rig, member("w1"))) == "r2-b"
    # w0 asked about itself again: its own nomination does not draw it anywhere.
    assert best(await scores(rig, nominated)) == "r1-a"


async def test_a_count_that_is_not_one_is_ignored_and_the_pod_still_scored(rig: Rig) -> None:
    rig.cluster.upsert_pod(member("w0", "r2-b"))
    for count in ("many", "0", str(2**31), "-3"):
        odd = member("w1", annotations={"stowage.io/gang-min-member": count})
        assert best(await scores(rig, odd)) == "r2-b", count
        size = rig.cluster.explain(request_of(odd, SETTINGS), "r2-b")["gang"]["size"]
        assert size == 0, count  # not known: the landed members and this pod
    counted = member("w1", annotations={"stowage.io/gang-min-member": str(2**31 - 1)})
    assert rig.cluster.explain(request_of(counted, SETTINGS), "r2-b")["gang"]["size"] == 2**31 - 1


async def test_a_call_counts_at_most_the_bound_of_members(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gang with more members than a call counts (each asks for nothing: the nodes keep
    their room): the first MAX_MEMBERS_COUNTED are counted, no more (the bound lowered
    to 40 here, for speed: the same code counts to 10,000)."""
    most = 40
    monkeypatch.setattr(ganglocality, "MAX_MEMBERS_COUNTED", most)
    for k in range(most + 5):
        landed = member(f"m{k}", NAMES[k % 4])
        landed["spec"]["containers"][0]["resources"] = {}
        rig.cluster.upsert_pod(landed)
    explained = rig.cluster.explain(request_of(member("w1"), SETTINGS), "r1-a")
    assert explained["gang"]["landed"] == most


async def test_a_node_moved_to_another_rack_counts_there_at_once(rig: Rig) -> None:
    rig.cluster.upsert_pod(member("w0", "r2-b"))
    assert (await scores(rig, member("w1")))["r2-a"] > (await scores(rig, member("w1")))["r1-a"]
    moved = racked("r2-b")
    moved["metadata"]["labels"][RACK] = "r1"  # the Node watch: relabelled into rack r1
    rig.cluster.upsert_node(moved)
    found = await scores(rig, member("w1"))
    assert best(found) == "r2-b"
    assert found["r1-a"] > found["r2-a"]  # r1 holds the gang's member now


async def test_debug_explain_shows_the_gang_over_http(rig: Rig, aiohttp_client: Any) -> None:
    """``GET /debug/explain`` of a pending member (as the pod watch has it)."""
    app = web.Application()
    app[SERVICES] = rig.services
    debug.add_routes(app)
    client = await aiohttp_client(app)
    rig.cluster.upsert_pod(member("w0", "r2-b"))
    rig.cluster.upsert_pod(member("w1"))
    resp = await client.get("/debug/explain", params={"pod": "ns/w1", "node": "r1-a"})
    assert resp.status == 200
    gang = (await resp.json())["gang"]
    assert (gang["gang"], gang["landed"], gang["remaining"]) == ("ns/train", 1, 1)
    assert [level["level"] for level in gang["levels"]] == [RACK, "node"]
    assert [level["gang_domains"] for level in gang["levels"]] == [{"r2": 1}, {"r2-b": 1}]
    assert gang["levels"][0]["domain"] == "r1"
    solo = await client.get("/debug/explain", params={"pod": "ns/w0", "node": "r1-a"})
    assert (await solo.json())["gang"]["landed"] == 0  # w0 itself is not one of its landed
