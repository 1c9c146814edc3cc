"""The leader's eviction cycle end to end: the planner over a live cluster fed with the
same objects the API emulator holds, the executor acting on its plans through the real
client and the real Event recorder, on a fake clock. The pressure trigger's window and
freshness; preemption under the two-level rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from coordinator.config import CoordinatorSettings, EventSettings, PolicySettings
from coordinator.decisionlog import DecisionLog
from coordinator.eviction.cycle import Cycle
from coordinator.eviction.executor import Executor, Sharing
from coordinator.kube.approvals import ApprovalReader
from coordinator.kube.client import api_client
from coordinator.kube.cooldowns import CooldownLease
from coordinator.kube.events import EventRecorder
from coordinator.kube.evictions import Evictor
from coordinator.kube.leader import Fence
from coordinator.live import LiveCluster, cooldowns
from coordinator.metrics import CoordinatorMetrics
from coordinator.state.signals import NodeSignals
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import EVENTS, PODS
from tests.coordinator.eviction.evictrig import node, pod
from tests.hosts import FakeClock

HIGH = 10_000
MEDIUM = 1_000


class CycleRig:
    def __init__(self, kube: KubeApi, **evictions: Any) -> None:
        self.kube = kube
        self.clock = FakeClock()
        base = CoordinatorSettings(policy=PolicySettings(name="most-allocated"))
        self.settings = dataclasses.replace(
            base, evictions=dataclasses.replace(base.evictions, **evictions)
        )
        metrics = CoordinatorMetrics()
        self.cluster = LiveCluster(self.settings, self.clock, metrics)
        self.cluster.budgets.replace([])
        self.cluster.upsert_node(node("gpu-a"))
        fence = Fence(1e9, self.clock.monotonic)
        fence.renewed(self.clock.monotonic())
        self.client = api_client(host=kube.url)
        evictor = Evictor(self.client, fence)
        recorder = EventRecorder(
            client.CoreV1Api(self.client), fence, self.clock, EventSettings(), metrics,
        )  # fmt: skip
        self.log = DecisionLog()
        approved = ApprovalReader(self.client, self.settings.kube.namespace)
        shared = CooldownLease(self.client, self.settings.kube.namespace, fence)
        executor = Executor(
            self.settings.evictions, evictor, recorder, evictor, approved, metrics, self.clock,
            self.log, Sharing(self.cluster.cooldowns, shared),
        )  # fmt: skip
        self.cycle = Cycle(self.cluster, executor)

    def add(self, obj: dict[str, Any]) -> str:
        """The pod in the emulator and, as its watch would deliver it, in the cluster."""
        self.kube.add_namespace(obj["metadata"]["namespace"])
        stored = self.kube.store.create(PODS, obj)
        self.cluster.upsert_pod(stored)
        return obj["metadata"]["name"]

    def exists(self, name: str, namespace: str = "ns") -> bool:
        return any(p["metadata"]["name"] == name for p in self.kube.store.list(PODS, namespace)[0])

    def report(self, full_pct: float) -> None:
        """A report of node gpu-a received now (memory PSI full avg10)."""
        measured_at = self.clock.wall()
        self.cluster.signals["gpu-a"] = NodeSignals(
            measured_at=measured_at, memory_full_pct=full_pct
        )
        self.cluster.freshness.receive("gpu-a", self.clock.monotonic(), measured_at)

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        api.add_namespace("stowage-system")
        yield api


def best_effort(name: str, memory: str) -> dict[str, Any]:
    return pod(name, node="gpu-a", memory=memory, annotations={"stowage.io/qos": "best-effort"})


async def test_pressure_that_holds_for_the_window_evicts_a_best_effort_pod(kube: KubeApi) -> None:
    rig = CycleRig(kube, enabled=True, pressure_for_s=30)
    try:
        rig.add(best_effort("small", "1Gi"))
        rig.add(best_effort("large", "8Gi"))
        for _ in range(3):  # 0, 10, 20 s: not yet 30 s of pressure
            rig.report(40.0)
            await rig.cycle.run()
            assert rig.exists("large")
            rig.clock.advance(10)
        rig.report(40.0)
        await rig.cycle.run()
        assert not rig.exists("large") and rig.exists("small")
        assert "pressure gpu-a evicted" in rig.log.lines()[-1]
    finally:
        rig.close()


async def test_a_dip_below_the_threshold_starts_the_window_afresh(kube: KubeApi) -> None:
    rig = CycleRig(kube, enabled=True, pressure_for_s=30, pressure_full_avg10_pct=10)
    try:
        rig.add(best_effort("large", "8Gi"))
        for full in (40.0, 40.0, 5.0, 40.0, 40.0, 40.0):  # the dip at 20 s
            rig.report(full)
            await rig.cycle.run()
            rig.clock.advance(10)
        assert rig.exists("large")  # 30 s since the dip only now
        rig.report(40.0)
        await rig.cycle.run()
        assert not rig.exists("large")
    finally:
        rig.close()


@pytest.mark.parametrize("held_s", [0, 30], ids=["one report", "a whole window"])
async def test_a_stale_report_never_leads_to_an_eviction(kube: KubeApi, held_s: int) -> None:
    """Pressure reported for ``held_s`` (30 s: the whole window, due at the next cycle),
    then the latest report goes older than the TTL before a cycle looks at it (the expiry
    loop has not run yet, so the signals are still held): nothing is evicted."""
    rig = CycleRig(kube, enabled=True, pressure_for_s=30)
    try:
        rig.add(best_effort("large", "8Gi"))
        for _ in range(held_s // 10):  # cycles at 0, 10, 20 s: not yet due
            rig.report(40.0)
            await rig.cycle.run()
            rig.clock.advance(10)
        rig.report(40.0)
        rig.clock.advance(rig.settings.signals.report_ttl_s + 1)
        await rig.cycle.run()
        assert rig.exists("large")
        assert not any("pressure" in line for line in rig.log.lines())
    finally:
        rig.close()


async def test_preemption_evicts_a_low_pod_for_a_high_one_and_reports_it(kube: KubeApi) -> None:
    rig = CycleRig(kube)  # dry run: the default
    try:
        rig.add(pod("low", node="gpu-a", gpus=8))
        rig.add(pod("want", gpus=8, priority=HIGH))
        await rig.cycle.run()
        assert rig.exists("low")
        assert "preemption ns/want dry-run" in rig.log.lines()[-1]
        assert "ns/low=dry-run" in rig.log.lines()[-1]
    finally:
        rig.close()


async def test_preemption_never_displaces_a_pod_less_than_two_levels_below(
    kube: KubeApi,
) -> None:
    rig = CycleRig(kube, enabled=True)
    try:
        rig.add(pod("medium", node="gpu-a", gpus=8, priority=MEDIUM))
        rig.add(pod("want", gpus=8, priority=HIGH))
        await rig.cycle.run()
        assert rig.exists("medium")
        assert "refused" in rig.log.lines()[-1]
    finally:
        rig.close()


async def test_a_single_report_never_evicts_however_long_it_stays_fresh(kube: KubeApi) -> None:
    """The dwell is between reports: one report under pressure, still fresh when the
    window has passed (30 s < the 60 s TTL), is not pressure seen to hold."""
    rig = CycleRig(kube, enabled=True, pressure_for_s=30)
    try:
        rig.add(best_effort("large", "8Gi"))
        rig.report(40.0)
        await rig.cycle.run()
        rig.clock.advance(31)
        await rig.cycle.run()
        assert rig.exists("large")
        rig.report(40.0)  # a second report, 31 s after the first: it held
        await rig.cycle.run()
        assert not rig.exists("large")
    finally:
        rig.close()


async def test_a_cooldown_refusal_is_one_event_however_many_cycles_it_lasts(
    kube: KubeApi,
) -> None:
    """The refusal's text carries no seconds left, so the cycle tells it once (and the API
    server could dedup it besides)."""
    rig = CycleRig(kube, cooldown_s=300)
    try:
        rig.add(pod("low", node="gpu-a", gpus=8))
        rig.add(pod("want", gpus=8, priority=HIGH))
        await rig.cycle.run()  # a dry-run round: queue ns cools down
        rig.add(pod("next", gpus=8, priority=HIGH))
        for _ in range(4):
            rig.clock.advance(10)
            await rig.cycle.run()
        told = [
            e
            for e in kube.store.list(EVENTS, "ns")[0]
            if e["involvedObject"]["name"] == "next" and e["reason"] == "EvictionNotPlanned"
        ]
        assert len(told) == 1 and told[0].get("count", 1) == 1
        assert "cooling down" in told[0]["message"]
    finally:
        rig.close()


async def test_the_cycle_budget_defers_the_rest_to_the_next_cycle_first(kube: KubeApi) -> None:
    """With a second passing at every reading of the clock, planning the first pod spends
    the cycle's budget (its search cut too): the second is planned first in the next
    cycle."""
    rig = CycleRig(kube, cycle_budget_s=1.5)
    try:
        rig.add(pod("low", node="gpu-a", gpus=8))
        rig.add(pod("a-want", gpus=8, priority=HIGH))
        rig.add(pod("b-want", gpus=8, priority=HIGH))
        readings = iter(range(10**6))
        rig.clock.monotonic = lambda: 1000.0 + next(readings)  # type: ignore[method-assign]
        await rig.cycle.run()
        assert [line for line in rig.log.lines() if "b-want" in line] == []
        assert any("ns/a-want" in line for line in rig.log.lines())
        before = len(rig.log.lines())
        await rig.cycle.run()
        assert "ns/b-want" in rig.log.lines()[before]
    finally:
        rig.close()


async def test_a_new_leader_plans_nothing_for_a_queue_the_last_one_cooled(kube: KubeApi) -> None:
    """The Lease says queue ns had a round lately (an earlier leader's): this leader's
    planner refuses the round, told once on the pod, though its executor never spent it."""
    rig = CycleRig(kube, enabled=True, cooldown_s=300)
    try:
        rig.add(pod("low", node="gpu-a", gpus=8))
        rig.add(pod("want", gpus=8, priority=HIGH))
        until = {"ns": rig.clock.wall() + 100}
        rig.cluster.cooldowns.observe(cooldowns.value(until, rig.clock.wall()))
        await rig.cycle.run()
        assert rig.exists("low")
        assert (
            "preemption ns/want refused: queue ns is cooling down after its last round"
            in (rig.log.lines()[-1])
        )
        rig.clock.advance(101)
        await rig.cycle.run()
        assert not rig.exists("low")
    finally:
        rig.close()
