"""The eviction executor against the API emulator (PDBs answer 429), through the real
client, the real Evictor and the real Event recorder, on a fake clock: dry run changes
nothing, the cooldown per queue, caps per cycle, the rate, the approval gate and its
expiry, loop prevention, and a PDB stopping a preemption before anything is evicted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from coordinator.config import EventSettings, EvictionSettings
from coordinator.decisionlog import DecisionLog
from coordinator.eviction.executor import APPROVE_KEY, PLAN_KEY, Executor, plan_id
from coordinator.eviction.plan import Level, Plan, Victim
from coordinator.kube.client import api_client
from coordinator.kube.events import EventRecorder
from coordinator.kube.evictions import Evictor
from coordinator.kube.leader import Fence
from coordinator.metrics import CoordinatorMetrics
from hack.kubeapi import KubeApi, objects
from hack.kubeapi.resources import EVENTS, PDBS, PODS
from tests.hosts import FakeClock


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        api.add_namespace("stowage-system")
        yield api


class Rig:
    def __init__(self, kube: KubeApi, **settings: Any) -> None:
        self.kube = kube
        self.clock = FakeClock()
        fence = Fence(1e9, self.clock.monotonic)
        fence.renewed(self.clock.monotonic())
        self.client = api_client(host=kube.url)
        evictor = Evictor(self.client, fence)
        self.metrics = CoordinatorMetrics()
        events = EventRecorder(
            client.CoreV1Api(self.client), fence, self.clock, EventSettings(), self.metrics,
        )  # fmt: skip
        self.log = DecisionLog()
        self.executor = Executor(
            EvictionSettings(**settings), evictor, events, evictor, self.metrics, self.clock,
            self.log,
        )  # fmt: skip

    def pod(
        self, name: str, node: str = "n1", namespace: str = "default", owner: str | None = None,
        **fields: Any,
    ) -> Victim:  # fmt: skip
        obj = objects.pod(name, namespace, node=node, **fields)
        if owner is not None:
            obj["metadata"]["ownerReferences"] = [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner,
                 "controller": True}
            ]  # fmt: skip
        self.kube.add_namespace(namespace)
        uid = self.kube.store.create(PODS, obj)["metadata"]["uid"]
        return Victim(uid, namespace, name, node, Level.LOW, 0, namespace, None, None, "low")

    def exists(self, victim: Victim) -> bool:
        pods = self.kube.store.list(PODS, victim.namespace)[0]
        return any(p["metadata"]["uid"] == victim.uid for p in pods)

    def reasons(self, name: str) -> list[str]:
        return [
            e["reason"]
            for e in self.kube.store.list(EVENTS, None)[0]
            if e["involvedObject"]["name"] == name
        ]

    def annotations(self, name: str, namespace: str = "default") -> dict[str, str]:
        return self.kube.store.get(PODS, namespace, name)["metadata"].get("annotations") or {}

    def evicted(self, trigger: str = "preemption") -> float:
        return self.metrics.evictions.labels(trigger, "evicted")._value.get()

    async def cycle(self, *plans: Plan) -> list[str]:
        await self.executor.start_cycle()
        return [await self.executor.consider(p) for p in plans]

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def rig(kube: KubeApi) -> Iterator[Rig]:
    r = Rig(kube, enabled=True)
    yield r
    r.close()


def preemption(
    victims: list[Victim], preemptor: str = "default/big", queue: str = "team-a",
    node: str = "n1", needs_approval: bool = False,
) -> Plan:  # fmt: skip
    return Plan(
        "preemption", node, tuple(victims), preemptor, queue, "big fits on n1",
        needs_approval, (float(len(victims)),),
    )  # fmt: skip


def pressure(victims: list[Victim], node: str = "n1") -> Plan:
    return Plan("pressure", node, tuple(victims), None, node, "memory full 40%", False, (1.0,))


async def test_a_plan_is_executed_and_told(rig: Rig) -> None:
    rig.pod("big", node=None, phase="Pending")
    a, b = rig.pod("a"), rig.pod("b")
    assert await rig.cycle(preemption([a, b])) == ["evicted"]
    assert not rig.exists(a) and not rig.exists(b)
    assert rig.evicted() == 2
    assert "Evicted" in rig.reasons("a") and "PreemptionExecuted" in rig.reasons("big")
    assert "preemption default/big evicted" in rig.log.lines()[-1]


async def test_dry_run_reports_but_changes_nothing(kube: KubeApi) -> None:
    rig = Rig(kube)  # evictions.enabled defaults to false
    try:
        a = rig.pod("a", labels={"app": "a"})
        kube.add_pdb("a", "default", {"app": "a"}, disruptions_allowed=1)
        rv = kube.store.rv
        assert await rig.cycle(pressure([a])) == ["dry-run"]
        assert rig.exists(a)
        assert kube.store.get(PDBS, "default", "a")["status"]["disruptionsAllowed"] == 1
        # Only Events were written (the report), no pod or budget changed.
        changed = [
            o for r in (PODS, PDBS) for o in kube.store.list(r, None)[0]
            if int(o["metadata"]["resourceVersion"]) > rv
        ]  # fmt: skip
        assert changed == []
        assert rig.metrics.evictions.labels("pressure", "dry-run")._value.get() == 1
        assert "WouldEvict" in rig.reasons("a")
        assert "dry-run" in rig.log.lines()[-1]
    finally:
        rig.close()


async def test_one_round_per_queue_per_cooldown(rig: Rig) -> None:
    a, b, c = rig.pod("a"), rig.pod("b"), rig.pod("c")
    assert await rig.cycle(preemption([a])) == ["evicted"]
    rig.clock.advance(299)
    assert await rig.cycle(preemption([b], preemptor="default/other")) == ["refused"]
    assert rig.exists(b)
    assert "cooling down" in rig.log.lines()[-1]
    assert await rig.cycle(preemption([c], queue="team-b")) == ["evicted"]  # another queue
    rig.clock.advance(1)
    assert await rig.cycle(preemption([b])) == ["evicted"]


async def test_a_preemption_over_the_caps_is_refused_whole(kube: KubeApi) -> None:
    rig = Rig(kube, enabled=True, max_per_node_per_cycle=2)
    try:
        pods = [rig.pod(f"p{i}") for i in range(3)]
        assert await rig.cycle(preemption(pods)) == ["refused"]
        assert all(rig.exists(p) for p in pods)
        assert "exceed" in rig.log.lines()[-1]
    finally:
        rig.close()


@pytest.mark.parametrize(
    ("cap", "spread"),
    [
        ("max_per_cycle", [("n1", "ns1"), ("n2", "ns2"), ("n3", "ns3")]),
        ("max_per_node_per_cycle", [("n1", "ns1"), ("n1", "ns2"), ("n1", "ns3")]),
        ("max_per_namespace_per_cycle", [("n1", "ns1"), ("n2", "ns1"), ("n3", "ns1")]),
    ],
)
async def test_each_cap_holds_rounds_within_a_cycle(
    kube: KubeApi, cap: str, spread: list[tuple[str, str]]
) -> None:
    rig = Rig(kube, enabled=True, **{cap: 2})
    try:
        pods = [rig.pod(f"p{i}", node=n, namespace=ns) for i, (n, ns) in enumerate(spread)]
        plans = [
            preemption([p], preemptor=f"default/big-{i}", queue=f"q{i}", node=p.node)
            for i, p in enumerate(pods)
        ]
        assert await rig.cycle(*plans) == ["evicted", "evicted", "refused"]
        assert rig.exists(pods[2])
        assert await rig.cycle(plans[2]) == ["evicted"]  # a new cycle, fresh caps
    finally:
        rig.close()


async def test_a_pressure_plan_is_cut_to_the_caps(kube: KubeApi) -> None:
    rig = Rig(kube, enabled=True, max_per_node_per_cycle=2)
    try:
        pods = [rig.pod(f"p{i}") for i in range(3)]
        assert await rig.cycle(pressure(pods)) == ["partial"]
        assert [rig.exists(p) for p in pods] == [False, False, True]
    finally:
        rig.close()


async def test_the_rate_limits_evictions_across_cycles(kube: KubeApi) -> None:
    rig = Rig(kube, enabled=True, max_evictions_per_s=0.1, eviction_burst=1)
    try:
        a, b = rig.pod("a", node="n1"), rig.pod("b", node="n2")
        assert await rig.cycle(pressure([a], "n1"), pressure([b], "n2")) == ["evicted", "refused"]
        rig.clock.advance(9.9)
        assert await rig.cycle(pressure([b], "n2")) == ["refused"]
        rig.clock.advance(0.1)  # 10 s at 0.1/s: one more token
        assert await rig.cycle(pressure([b], "n2")) == ["evicted"]
    finally:
        rig.close()


async def test_a_budget_stops_a_preemption_before_anything_is_evicted(rig: Rig) -> None:
    a = rig.pod("a")
    b = rig.pod("b", labels={"app": "b"})
    rig.kube.add_pdb("b", "default", {"app": "b"}, disruptions_allowed=0)
    assert await rig.cycle(preemption([a, b])) == ["refused"]
    assert rig.exists(a) and rig.exists(b)
    assert "disruption budget b" in rig.log.lines()[-1]
    # Not spent: a later plan of the same queue may go.
    assert await rig.cycle(preemption([a])) == ["evicted"]


async def test_a_replacement_is_not_evicted_again_for_the_same_reason(rig: Rig) -> None:
    first = rig.pod("web-1", owner="web-rs")
    assert await rig.cycle(pressure([first])) == ["evicted"]
    replacement = rig.pod("web-2", node="n2", owner="web-rs")
    rig.clock.advance(60)
    assert await rig.cycle(pressure([replacement], node="n2")) == ["refused"]
    assert rig.exists(replacement)
    assert "same owner ReplicaSet/default/web-rs" in rig.log.lines()[-1]
    # Another reason is another matter (the queue n2 has not had a round either).
    assert await rig.cycle(preemption([replacement], node="n2")) == ["evicted"]


async def test_the_replacement_may_go_once_the_cooldown_passed(rig: Rig) -> None:
    first = rig.pod("web-1", owner="web-rs")
    assert await rig.cycle(pressure([first])) == ["evicted"]
    replacement = rig.pod("web-2", owner="web-rs")
    rig.clock.advance(300)
    assert await rig.cycle(pressure([replacement])) == ["evicted"]


async def test_a_pressure_plan_skips_spared_victims_and_evicts_the_rest(rig: Rig) -> None:
    first = rig.pod("web-1", owner="web-rs")
    assert await rig.cycle(pressure([first], node="n0")) == ["evicted"]
    replacement, other = rig.pod("web-2", owner="web-rs"), rig.pod("batch-1", owner="batch")
    assert await rig.cycle(pressure([replacement, other])) == ["partial"]
    assert rig.exists(replacement) and not rig.exists(other)


async def test_a_plan_needing_approval_waits_for_it(rig: Rig) -> None:
    rig.pod("big", node=None, phase="Pending")
    a = rig.pod("a")
    plan = preemption([a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    published = rig.annotations("big")[PLAN_KEY]
    assert f"id={plan_id(plan)}" in published and "victims=default/a" in published
    assert "PreemptionPlanProposed" in rig.reasons("big")
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert rig.exists(a)

    rig.kube.store.update(PODS, "default", "big", _annotate({APPROVE_KEY: plan_id(plan)}))
    assert await rig.cycle(plan) == ["evicted"]
    assert not rig.exists(a)
    assert PLAN_KEY not in rig.annotations("big")


async def test_an_approval_does_not_carry_over_to_another_plan(rig: Rig) -> None:
    rig.pod("big", node=None, phase="Pending")
    a, b = rig.pod("a"), rig.pod("b")
    first = preemption([a], needs_approval=True)
    assert await rig.cycle(first) == ["awaiting-approval"]
    rig.kube.store.update(PODS, "default", "big", _annotate({APPROVE_KEY: "true"}))
    second = preemption([b], needs_approval=True)  # the planner now picks another victim
    assert await rig.cycle(second) == ["awaiting-approval"]
    assert rig.exists(a) and rig.exists(b)
    assert APPROVE_KEY not in rig.annotations("big")
    assert f"id={plan_id(second)}" in rig.annotations("big")[PLAN_KEY]


async def test_an_unapproved_plan_expires(kube: KubeApi) -> None:
    rig = Rig(kube, enabled=True, approval_ttl_s=600)
    try:
        rig.pod("big", node=None, phase="Pending")
        a = rig.pod("a")
        plan = preemption([a], needs_approval=True)
        assert await rig.cycle(plan) == ["awaiting-approval"]
        rig.clock.advance(600)
        await rig.executor.start_cycle()
        assert PLAN_KEY not in rig.annotations("big")
        assert "PreemptionPlanExpired" in rig.reasons("big")
        # Approved too late: no plan awaits, and no new one is proposed for a cooldown.
        rig.kube.store.update(PODS, "default", "big", _annotate({APPROVE_KEY: plan_id(plan)}))
        assert await rig.cycle(plan) == ["awaiting-approval"]
        assert rig.exists(a)
        assert "expired unapproved" in rig.log.lines()[-1]
    finally:
        rig.close()


def _annotate(values: dict[str, str]):  # type: ignore[no-untyped-def]
    def update(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"].setdefault("annotations", {}).update(values)
        obj["metadata"]["resourceVersion"] = ""
        return obj

    return update
