"""Nominations end to end: the leader's cycle plans in a forked child, the executor evicts
through the real client against the API emulator, and the preemptor is nominated to the
node its plan freed — in the Node's annotation, which the filter and the next plans
read. Two pending pods are never promised one node's room; the nomination ends when the
preemptor binds, or expires with an Event on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.eviction.answers import Plan
from coordinator.eviction.plan import plan_preemption
from coordinator.eviction.round import outdated
from coordinator.live import nominations
from coordinator.state.podfacts import PodFacts
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import EVENTS, NODES, PODS
from tests.coordinator.eviction.evictrig import NOW, EvictRig, node, pod
from tests.coordinator.eviction.test_eviction_cycle import CycleRig

HIGH = 10_000
MEDIUM = 1_000


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        api.add_namespace("stowage-system")
        yield api


def make_rig(kube: KubeApi, **evictions: Any) -> CycleRig:
    """gpu-a holds a low 8-GPU pod (the only victim there is), gpu-b a medium one a high
    pod may not displace; both Nodes are in the emulator too (nominations are written
    there)."""
    rig = CycleRig(kube, **evictions)
    for name in ("gpu-a", "gpu-b"):
        kube.store.create(NODES, node(name))
    rig.cluster.upsert_node(node("gpu-b"))
    rig.add(pod("low", node="gpu-a", gpus=8))
    rig.add(pod("medium", node="gpu-b", gpus=8, priority=MEDIUM))
    return rig


@pytest.fixture
def rig(kube: KubeApi) -> Iterator[CycleRig]:
    r = make_rig(kube, enabled=True)
    yield r
    r.close()


def want(name: str, namespace: str) -> dict[str, Any]:
    return pod(name, namespace=namespace, gpus=8, priority=HIGH)


def written(kube: KubeApi, name: str = "gpu-a") -> str | None:
    """The nominations annotation of the emulator's Node."""
    obj = kube.store.get(NODES, "", name)
    return (obj["metadata"].get("annotations") or {}).get(nominations.KEY)


def reasons(kube: KubeApi, pod_name: str, namespace: str) -> list[str]:
    return [
        e["reason"]
        for e in kube.store.list(EVENTS, namespace)[0]
        if e["involvedObject"]["name"] == pod_name
    ]


def facts(rig: CycleRig, key: str) -> PodFacts:
    return next(f for f in rig.cluster.facts.values() if f.key == key)


def gone(rig: CycleRig, key: str) -> None:
    """The watch saying the evicted pod is gone (the emulator deleted it)."""
    f = facts(rig, key)
    rig.cluster.remove_pod({"metadata": {"uid": f.uid, "namespace": f.namespace, "name": f.name}})


def bound(kube: KubeApi, rig: CycleRig, key: str, where: str) -> None:
    """The watch saying the pending pod was bound to ``where``."""
    namespace, _, name = key.partition("/")
    obj = kube.store.get(PODS, namespace, name)
    rig.cluster.upsert_pod({**obj, "spec": {**obj["spec"], "nodeName": where}})


async def test_two_pending_pods_are_never_promised_one_nodes_room(
    kube: KubeApi, rig: CycleRig
) -> None:
    """In other queues (namespaces), so no cooldown stands between them: the first gets
    gpu-a's only victim, the second no plan at all — in the same cycle, and in the next
    ones, once the victim is gone and gpu-a's room is held for the first."""
    rig.add(want("a-want", "team-a"))
    rig.add(want("b-want", "team-b"))
    await rig.cycle.run()
    assert not rig.exists("low")
    assert "PreemptionExecuted" in reasons(kube, "a-want", "team-a")
    assert "PreemptionExecuted" not in reasons(kube, "b-want", "team-b")
    assert "EvictionNotPlanned" in reasons(kube, "b-want", "team-b")
    text = written(kube)
    assert text is not None and f"team-a/a-want@{facts(rig, 'team-a/a-want').uid}=" in text
    gone(rig, "ns/low")
    rig.clock.advance(30)
    await rig.cycle.run()
    assert reasons(kube, "b-want", "team-b").count("PreemptionExecuted") == 0
    assert rig.exists("medium")
    b = facts(rig, "team-b/b-want")
    with rig.cluster.nominated_room(b.uid, b.priority):
        assert rig.cluster.filter(b.request, ["gpu-a"]).passing == []
    a = facts(rig, "team-a/a-want")
    with rig.cluster.nominated_room(a.uid, a.priority):
        assert rig.cluster.filter(a.request, ["gpu-a"]).passing == ["gpu-a"]


async def test_a_nominee_is_neither_planned_for_again_nor_its_room_offered(
    kube: KubeApi, rig: CycleRig
) -> None:
    """Next cycle gpu-a stands empty, held for a-want: a-want gets no second plan (nor a
    refusal saying it fits there), and b-want is planned onto gpu-c instead, whose low
    pod goes — not told that it fits on gpu-a without evicting anyone."""
    rig.add(want("a-want", "team-a"))
    await rig.cycle.run()
    gone(rig, "ns/low")
    kube.store.create(NODES, node("gpu-c"))
    rig.cluster.upsert_node(node("gpu-c"))
    rig.add(pod("low-c", node="gpu-c", gpus=8))
    rig.add(want("b-want", "team-b"))
    rig.clock.advance(30)
    await rig.cycle.run()
    assert reasons(kube, "a-want", "team-a") == ["PreemptionExecuted"]
    assert "PreemptionExecuted" in reasons(kube, "b-want", "team-b")
    assert not rig.exists("low-c")
    assert rig.exists("medium")


async def test_the_nomination_ends_when_the_preemptor_binds(kube: KubeApi, rig: CycleRig) -> None:
    rig.add(want("a-want", "team-a"))
    await rig.cycle.run()
    assert written(kube) is not None
    gone(rig, "ns/low")
    bound(kube, rig, "team-a/a-want", "gpu-a")
    await rig.cycle.run()
    assert written(kube) is None
    assert not rig.cluster.nominations
    assert "NominationExpired" not in reasons(kube, "a-want", "team-a")


async def test_an_unused_nomination_expires_with_an_event(kube: KubeApi, rig: CycleRig) -> None:
    rig.add(want("a-want", "team-a"))
    await rig.cycle.run()
    gone(rig, "ns/low")
    rig.clock.advance(rig.settings.evictions.nomination_ttl_s - 1)
    await rig.cycle.run()
    assert written(kube) is not None
    rig.clock.advance(2)
    await rig.cycle.run()
    assert written(kube) is None
    assert reasons(kube, "a-want", "team-a").count("NominationExpired") == 1
    rig.add(pod("other", namespace="team-b", gpus=8))
    o = facts(rig, "team-b/other")
    with rig.cluster.nominated_room(o.uid, o.priority):  # the room is everyone's again
        assert rig.cluster.filter(o.request, ["gpu-a"]).passing == ["gpu-a"]


async def test_a_dry_run_nominates_no_one(kube: KubeApi) -> None:
    rig = make_rig(kube)  # evictions not enabled
    try:
        rig.add(want("a-want", "team-a"))
        await rig.cycle.run()
        assert "PreemptionExecuted" in reasons(kube, "a-want", "team-a")
        assert rig.exists("low")
        assert written(kube) is None and not rig.cluster.nominations
    finally:
        rig.close()


def test_a_plan_made_over_a_snapshot_is_dropped_once_it_no_longer_holds() -> None:
    """The answer comes back from the planning child after the watches moved on."""
    low = pod("low", node="gpu-a", gpus=8)
    want_pod = pod("want", gpus=8, priority=HIGH)
    r = EvictRig().nodes(node("gpu-a")).pods(low, want_pod)
    plan = plan_preemption(r.view(), r.facts(want_pod), r.evictions, NOW)
    assert isinstance(plan, Plan)
    assert outdated(r.cluster, plan) is None
    r.cluster.remove_pod(low)
    assert outdated(r.cluster, plan) == "ns/low left gpu-a while the plan was made"
    r.pods(low)
    assert outdated(r.cluster, plan) is None
    r.pods({**want_pod, "spec": {**want_pod["spec"], "nodeName": "gpu-a"}})
    assert outdated(r.cluster, plan) == "ns/want was bound or deleted while its plan was made"
