"""Two coordinator replicas on one emulated API server: the leader's eviction cycle evicts
for a pending pod, and the follower — which kube-scheduler may ask as well — then lets no
victim of that queue through its preempt verb until the cooldown ends."""

from __future__ import annotations

import dataclasses
from typing import Any

from coordinator.config import EvictionSettings
from coordinator.live import cooldowns
from hack.kubeapi import objects
from hack.kubeapi.resources import LEASES, PODS
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

HIGH = 10_000
NODES = ("node-a", "node-b")


def preempt_body(victim_node: str, victim_uid: str) -> dict[str, Any]:
    """kube-scheduler's preempt call for a high pod of namespace ns, proposing one victim."""
    pod = objects.pod("next", "ns", phase="Pending", requests={"cpu": "4"}, priority=HIGH)
    pod["metadata"]["uid"] = "uid-next"
    return {
        "Pod": pod,
        "NodeNameToMetaVictims": {victim_node: {"Pods": [{"UID": victim_uid}]}},
    }


async def test_a_follower_s_verb_honours_the_cooldown_of_the_leader_s_round(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    for node in NODES:
        api.add_node(node, capacity={"cpu": "4", "memory": "16Gi", "pods": "110"})
    low = {
        node: api.add_pod(f"low-{node}", "ns", node=node, requests={"cpu": "4"}) for node in NODES
    }
    evictions = EvictionSettings(enabled=True, cycle_s=0.2, cooldown_s=300)
    settings = dataclasses.replace(rig.settings(), evictions=evictions)
    a = await start(settings, name="a")
    await rig.eventually(lambda: a.leading, "a leads")
    b = await start(settings, name="b")
    await rig.eventually(
        lambda: b.services.synced.is_set() and b.cluster.budgets.synced, "b's caches synced"
    )
    assert not b.leading

    # No round yet: b passes kube-scheduler's proposal.
    uid_b = low["node-b"]["metadata"]["uid"]
    status, reply = await b.post_json("/scheduler/preempt", preempt_body("node-b", uid_b))
    assert status == 200
    assert reply["NodeNameToMetaVictims"] == {
        "node-b": {"Pods": [{"UID": uid_b}], "NumPDBViolations": 0}
    }

    # A high pod of the same queue fits nowhere: the leader evicts one low pod for it.
    api.add_pod("want", "ns", phase="Pending", requests={"cpu": "4"}, priority=HIGH)

    def left() -> list[str]:
        names = {p["metadata"]["name"] for p in api.store.list(PODS, "ns")[0]}
        return [node for node in NODES if f"low-{node}" in names]

    await rig.eventually(lambda: len(left()) == 1, "the leader evicted one low pod")

    def shared() -> dict[str, float]:
        lease = api.store.find(LEASES, rig.NAMESPACE, cooldowns.LEASE) or {"metadata": {}}
        text = (lease["metadata"].get("annotations") or {}).get(cooldowns.KEY)
        return cooldowns.parse(text) if text else {}

    await rig.eventually(lambda: "ns" in shared(), "the leader wrote the Lease")
    await rig.eventually(
        lambda: "ns" in b.cluster.cooldowns.active(b.services.clock.wall()),
        "b's watch delivered the Lease",
    )

    # The remaining low pod is a victim of the cooling queue: b passes none.
    (node,) = left()
    body = preempt_body(node, low[node]["metadata"]["uid"])
    status, reply = await b.post_json("/scheduler/preempt", body)
    assert status == 200 and reply == {"NodeNameToMetaVictims": {}}
    status, text = await b.get_debug("/debug/evictions")
    assert status == 200
    assert "preempt-verb ns/next refused: queue ns is cooling down" in text
    assert not b.leading
