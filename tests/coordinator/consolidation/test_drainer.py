"""The drainer wired as the leader wires it — the real client's taint writer, the eviction
executor with its Evictor, Event recorder and approval reader — against the API
emulator: dry run taints nothing and evicts nothing, enabled taints before the first
eviction, an abandoned drain gets its taint back off, and nothing is written without
the lease."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from common import annotations as ann
from coordinator.config import (
    CoordinatorSettings,
    DrainSettings,
    EventSettings,
    EvictionSettings,
    PolicySettings,
)
from coordinator.consolidation.drain import DISRUPTED, plan_drains
from coordinator.consolidation.drainer import ABANDONED, STARTED, WOULD_DRAIN, Drainer
from coordinator.consolidation.patrol import Candidate, Patrol
from coordinator.consolidation.taint import taint_writer
from coordinator.consolidation.windows import BY_NAME, Summary
from coordinator.kube.events import EventRecorder
from coordinator.kube.leader import Fence
from hack.kubeapi import KubeApi, objects
from hack.kubeapi.resources import NODES, PODS
from tests.coordinator.consolidation.drainrig import REPLICASET
from tests.coordinator.eviction.evictrig import EvictRig
from tests.coordinator.eviction.executorrig import Rig, kube

__all__ = ["kube"]  # the emulator fixture

CAPACITY = {"cpu": "16", "memory": "64Gi", "pods": "110"}


class Cluster:
    """Nodes and pods in the emulator, and the coordinator's view of the same objects."""

    def __init__(self, kube: KubeApi, rig: Rig) -> None:
        self.kube = kube
        self.rig = rig

    def node(self, name: str, tainted: bool = False) -> None:
        taints = [{"key": DISRUPTED, "effect": "NoSchedule"}] if tainted else None
        self.kube.store.create(NODES, objects.node(name, capacity=CAPACITY, taints=taints))

    def pod(self, name: str, node: str, priority: int = 0) -> None:
        obj = objects.pod(
            name, node=node, requests={"cpu": "2", "memory": "1Gi"}, priority=priority
        )
        obj["metadata"]["ownerReferences"] = [{**REPLICASET, "controller": True}]
        self.kube.store.create(PODS, obj)

    def live(self, drain: DrainSettings) -> EvictRig:
        """The coordinator's live cluster, fed the emulator's objects."""
        settings = CoordinatorSettings(policy=PolicySettings(name="most-allocated"), drain=drain)
        seen = EvictRig(settings=settings)
        seen.nodes(*self.kube.store.list(NODES, None)[0])
        seen.pods(*self.kube.store.list(PODS, "default")[0])
        return seen

    def view(self, drain: DrainSettings) -> Any:
        return self.live(drain).view()

    def taints(self, name: str) -> list[str]:
        node = self.kube.store.get(NODES, "", name)
        return [t["key"] for t in node["spec"].get("taints") or []]

    def pods(self) -> set[str]:
        return {p["metadata"]["name"] for p in self.kube.store.list(PODS, "default")[0]}


@pytest.fixture
def make(
    kube: KubeApi,
) -> Iterator[Callable[..., tuple[Cluster, Drainer, list[tuple[str, bool, set[str]]]]]]:
    rigs: list[Rig] = []

    def build(
        *, evict: bool, drain: bool = True, lease: bool = True, share: bool = False
    ) -> tuple[Cluster, Drainer, list[tuple[str, bool, set[str]]]]:
        rig = Rig(kube, share=share, enabled=evict)
        rigs.append(rig)
        cluster = Cluster(kube, rig)
        writes: list[tuple[str, bool, set[str]]] = []
        write = taint_writer(rig.client)

        def taint(node: str, present: bool) -> bool:
            writes.append((node, present, cluster.pods()))  # what was still running then
            return write(node, present)

        fence = Fence(1e9, rig.clock.monotonic)
        if lease:
            fence.renewed(rig.clock.monotonic())
        events = EventRecorder(
            client.CoreV1Api(rig.client), fence, rig.clock, EventSettings(), rig.metrics
        )
        drainer = Drainer(
            DrainSettings(enabled=drain), EvictionSettings(enabled=evict), rig.executor, taint,
            events, fence, rig.clock,
        )  # fmt: skip
        return cluster, drainer, writes

    yield build
    for rig in rigs:
        rig.close()


async def test_dry_run_taints_nothing_and_evicts_nothing_but_tells_the_plan(make: Any) -> None:
    cluster, drainer, writes = make(evict=False)
    cluster.node("a")
    cluster.node("b")
    cluster.pod("web", "a")
    cluster.pod("busy", "b")
    await cluster.rig.executor.start_cycle()
    plan = await drainer.run(cluster.view(DrainSettings(enabled=True)), ["a"])
    assert plan is not None and [d.node for d in plan.drains] == ["a"]
    assert writes == []
    assert cluster.taints("a") == []
    assert cluster.pods() == {"web", "busy"}
    assert WOULD_DRAIN in cluster.rig.reasons("a")
    assert "WouldEvict" in cluster.rig.reasons("web")


async def test_enabled_taints_the_node_before_its_pods_move(make: Any) -> None:
    cluster, drainer, writes = make(evict=True)
    cluster.node("a")
    cluster.node("b")
    cluster.pod("web", "a")
    cluster.pod("busy", "b")
    await cluster.rig.executor.start_cycle()
    await drainer.run(cluster.view(DrainSettings(enabled=True)), ["a"])
    assert writes == [("a", True, {"web", "busy"})]  # tainted while web still ran
    assert cluster.taints("a") == [DISRUPTED]
    assert cluster.pods() == {"busy"}
    assert STARTED in cluster.rig.reasons("a")
    assert "ConsolidationEviction" in cluster.rig.reasons("a")
    assert "Evicted" in cluster.rig.reasons("web")


async def test_a_drain_the_plan_no_longer_makes_is_abandoned_and_the_taint_removed(
    make: Any,
) -> None:
    cluster, drainer, writes = make(evict=True)
    cluster.node("a", tainted=True)
    cluster.node("b")
    cluster.pod("vip", "a", priority=10_000)  # high: above drain.max_level
    await cluster.rig.executor.start_cycle()
    plan = await drainer.run(cluster.view(DrainSettings(enabled=True)), ["a"])
    assert plan is not None and plan.drains == ()
    assert cluster.taints("a") == []
    assert cluster.pods() == {"vip"}
    (event,) = [e for e in cluster.rig.events("a") if e["reason"] == ABANDONED]
    assert "default/vip is high" in event["message"]


async def test_drains_switched_off_take_every_drain_taint_off(make: Any) -> None:
    cluster, drainer, _ = make(evict=True, drain=False)
    cluster.node("a", tainted=True)
    cluster.node("b")
    cluster.pod("web", "a")
    assert await drainer.run(cluster.view(DrainSettings()), ["a"]) is None
    assert cluster.taints("a") == []
    assert cluster.pods() == {"web"}


async def test_without_the_taint_written_no_pod_moves(make: Any) -> None:
    cluster, drainer, _ = make(evict=True, lease=False)
    cluster.node("a")
    cluster.node("b")
    cluster.pod("web", "a")
    await cluster.rig.executor.start_cycle()
    await drainer.run(cluster.view(DrainSettings(enabled=True)), ["a"])
    assert cluster.taints("a") == []
    assert cluster.pods() == {"web"}  # the lease is not held: no taint, so no eviction


async def test_a_drain_already_tainted_keeps_its_taint_and_other_taints_are_kept(
    make: Any,
) -> None:
    cluster, drainer, writes = make(evict=True)
    cluster.node("a")
    cluster.node("b")
    team = {"key": "team", "value": "x", "effect": "PreferNoSchedule"}
    cluster.kube.store.update(NODES, "", "a", lambda n: {**n, "spec": {"taints": [team]}})
    cluster.pod("web", "a")
    await cluster.rig.executor.start_cycle()
    await drainer.run(cluster.view(DrainSettings(enabled=True)), ["a"])
    assert cluster.taints("a") == ["team", DISRUPTED]
    assert writes == [("a", True, {"web"})]


async def test_a_cycle_plans_in_a_forked_child_over_the_patrols_candidates(make: Any) -> None:
    cluster, drainer, writes = make(evict=True)
    cluster.node("a")
    cluster.node("b")
    cluster.node("c")
    cluster.pod("web", "a")
    cluster.pod("busy", "b")
    live = cluster.live(DrainSettings(enabled=True))
    patrol = Patrol(live.cluster, live.settings.patrol, live.clock)
    under = Summary(BY_NAME["1h"], 10.0, 10.0, 1.0)
    patrol.judged = [Candidate("a", under, "under"), Candidate("c", under, "under")]
    await cluster.rig.executor.start_cycle()
    plan = await drainer.cycle(live.cluster, patrol)
    assert plan is not None
    # a first (equal means, by name); c, empty, counts against no limit.
    assert [(d.node, [m.destination for m in d.moves]) for d in plan.drains] == [
        ("a", ["b"]),
        ("c", []),
    ]
    assert writes == [("a", True, {"web", "busy"})]
    assert cluster.pods() == {"busy"}


async def test_a_node_whose_pods_an_earlier_leader_cooled_is_not_drained(make: Any) -> None:
    """This leader's executor ran no round; the shared Lease says an earlier one did, for
    node ``a`` (a drain's round is keyed by its node): the drain is planned under that
    cooldown, so the node is neither tainted nor emptied."""
    cluster, drainer, writes = make(evict=True, share=True)
    cluster.node("a")
    cluster.node("b")
    cluster.pod("web", "a")
    cluster.pod("busy", "b")
    live = cluster.live(DrainSettings(enabled=True))
    patrol = Patrol(live.cluster, live.settings.patrol, live.clock)
    patrol.judged = [Candidate("a", Summary(BY_NAME["1h"], 10.0, 10.0, 1.0), "under")]
    until = cluster.rig.clock.wall() + 120
    cluster.rig.seen.observe(json.dumps({"a": ann.timestamp(until)}))
    await cluster.rig.executor.start_cycle()
    plan = await drainer.cycle(live.cluster, patrol)
    assert plan is not None
    assert plan.drains == ()
    (blocked,) = plan.blocked
    assert blocked.node == "a" and "cooling down" in blocked.reason, blocked
    assert writes == []
    assert cluster.pods() == {"web", "busy"}


def test_the_taint_writer_writes_only_a_change(make: Any) -> None:
    cluster, _, _ = make(evict=True)
    cluster.node("a")
    write = taint_writer(cluster.rig.client)
    assert write("a", True) is True
    version = cluster.kube.store.get(NODES, "", "a")["metadata"]["resourceVersion"]
    assert write("a", True) is False
    assert cluster.kube.store.get(NODES, "", "a")["metadata"]["resourceVersion"] == version
    assert write("a", False) is True and cluster.taints("a") == []
    assert write("a", False) is False


async def test_a_drain_whose_pods_left_while_it_was_planned_waits_for_the_next_plan(
    make: Any,
) -> None:
    cluster, drainer, writes = make(evict=True)
    cluster.node("a")
    cluster.node("b")
    cluster.pod("web", "a")
    live = cluster.live(DrainSettings(enabled=True))
    planned = plan_drains(live.view(), ["a"], DrainSettings(), EvictionSettings(), 0.0)
    assert [d.node for d in planned.drains] == ["a"]
    web = cluster.kube.store.get(PODS, "default", "web")
    live.cluster.remove_pod(web)  # the watch saw it go after the fork
    await cluster.rig.executor.start_cycle()
    await drainer.act(planned, live.cluster)
    assert writes == [] and cluster.taints("a") == []
    assert cluster.pods() == {"web"}
