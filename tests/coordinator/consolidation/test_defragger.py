"""The defragmenter wired as the leader wires it — the eviction executor with its Evictor,
Event recorder and approval reader, the eviction cycle's nominations — against the API
emulator: nothing moves by default, dry run moves nothing but tells every move, enabled
moves the pods and nominates the pending pod to the room made, and the executor's guards
(the lease, the cooldown, approval) hold for migrations as for every round."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from common import annotations as ann
from coordinator.config import (
    CoordinatorSettings,
    DefragSettings,
    EvictionSettings,
    PolicySettings,
)
from coordinator.consolidation.defragger import Defragger, Round, plan_round, waiting
from coordinator.eviction.cycle import Cycle
from coordinator.live import nominations
from hack.kubeapi import KubeApi, objects
from hack.kubeapi.resources import NODES, PODS
from tests.coordinator.consolidation.drainrig import REPLICASET
from tests.coordinator.eviction.evictrig import EvictRig
from tests.coordinator.eviction.executorrig import Rig, kube

__all__ = ["kube"]  # the emulator fixture

GPU_NODE = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
ON = DefragSettings(enabled=True)


class Cluster:
    """GPU nodes and pods in the emulator, and the coordinator's view of the same objects:
    n1 and n2 have 8 GPUs each, n1 holds two one-GPU pods and n2 one (``small``); the
    8-GPU ``big`` is pending and fits once ``small`` moves to n1."""

    def __init__(self, kube: KubeApi, rig: Rig, evictions: EvictionSettings) -> None:
        self.kube = kube
        self.rig = rig
        self.evictions = evictions
        for name in ("n1", "n2"):
            kube.store.create(NODES, objects.node(name, capacity=GPU_NODE))
        self.pod("a", "n1")
        self.pod("b", "n1")
        self.pod("small", "n2")
        self.pod("big", None, gpus="8")

    def pod(self, name: str, node: str | None, gpus: str = "1", **fields: Any) -> None:
        obj = objects.pod(
            name,
            node=node,
            phase="Running" if node else "Pending",
            requests={"cpu": "1", "memory": "1Gi"},
            limits={"nvidia.com/gpu": gpus},
            priority=1_000,
            **fields,
        )
        obj["metadata"]["ownerReferences"] = [{**REPLICASET, "controller": True}]
        self.kube.store.create(PODS, obj)

    def live(self, defrag: DefragSettings = ON) -> EvictRig:
        """The coordinator's live cluster, fed the emulator's objects."""
        settings = CoordinatorSettings(
            policy=PolicySettings(name="most-allocated"),
            defrag=defrag,
            evictions=self.evictions,
        )
        seen = EvictRig(settings=settings)
        seen.nodes(*self.kube.store.list(NODES, None)[0])
        seen.pods(*self.kube.store.list(PODS, "default")[0])
        return seen

    def planned(self, live: EvictRig) -> Round:
        view = live.view()
        pods = waiting(live.cluster, live.settings.defrag)
        return plan_round(
            view, pods, live.settings.defrag, live.evictions, 0.0, live.clock.monotonic
        )

    def pods(self) -> set[str]:
        return {p["metadata"]["name"] for p in self.kube.store.list(PODS, "default")[0]}

    def nominated(self, node: str) -> str | None:
        notes = self.kube.store.get(NODES, "", node)["metadata"].get("annotations") or {}
        return notes.get(nominations.KEY)


Make = Callable[..., tuple[Cluster, Defragger, EvictRig]]


@pytest.fixture
def make(kube: KubeApi) -> Iterator[Make]:
    rigs: list[Rig] = []

    def build(
        *, evict: bool, defrag: DefragSettings = ON, share: bool = False, **evictions: Any
    ) -> tuple[Cluster, Defragger, EvictRig]:
        settings = EvictionSettings(enabled=evict, **evictions)
        rig = Rig(kube, share=share, enabled=evict, **evictions)  # the same settings
        rigs.append(rig)
        cluster = Cluster(kube, rig, settings)
        live = cluster.live(defrag)
        cycle = Cycle(live.cluster, rig.executor)
        defragger = Defragger(defrag, settings, rig.executor, cycle.nominate, rig.clock)
        return cluster, defragger, live

    yield build
    for rig in rigs:
        rig.close()


async def test_nothing_is_planned_or_moved_by_default(make: Make) -> None:
    cluster, defragger, live = make(evict=True, defrag=DefragSettings())
    await cluster.rig.executor.start_cycle()
    assert await defragger.cycle(live.cluster) is None
    assert cluster.pods() == {"a", "b", "small", "big"}
    assert cluster.rig.events("small") == [] and cluster.rig.events("big") == []


async def test_dry_run_moves_nothing_but_tells_each_move_and_why(make: Make) -> None:
    cluster, defragger, live = make(evict=False)
    await cluster.rig.executor.start_cycle()
    await defragger.act(cluster.planned(live), live.cluster)
    assert cluster.pods() == {"a", "b", "small", "big"}
    (moved,) = [e for e in cluster.rig.events("small") if e["reason"] == "WouldEvict"]
    assert "moves to n1: moved to make room for default/big" in moved["message"]
    (told,) = [e for e in cluster.rig.events("big") if e["reason"] == "DefragMigration"]
    assert told["message"].startswith("would evict (dry run) 1 of 1 on n2")
    assert cluster.nominated("n2") is None  # nothing was freed: no room to hold


async def test_enabled_moves_the_pods_and_nominates_the_pending_pod(make: Make) -> None:
    cluster, defragger, live = make(evict=True)
    await cluster.rig.executor.start_cycle()
    await defragger.act(cluster.planned(live), live.cluster)
    assert cluster.pods() == {"a", "b", "big"}
    assert "Evicted" in cluster.rig.reasons("small")
    assert "DefragMigration" in cluster.rig.reasons("big")
    held = cluster.nominated("n2")
    assert held is not None and "default/big@" in held


async def test_a_cycle_plans_in_a_forked_child(make: Make) -> None:
    cluster, defragger, live = make(evict=True)
    await cluster.rig.executor.start_cycle()
    planned = await defragger.cycle(live.cluster)
    assert planned is not None
    assert [(a.pod, getattr(a.answer, "node", None)) for a in planned.answers] == [
        ("default/big", "n2")
    ]
    assert cluster.pods() == {"a", "b", "big"}


async def test_without_the_lease_nothing_moves_and_nothing_is_nominated(make: Make) -> None:
    cluster, defragger, live = make(evict=True)
    await cluster.rig.executor.start_cycle()
    planned = cluster.planned(live)
    cluster.rig.clock.advance(2e9)  # past the rig's renew deadline: the lease is lost
    await defragger.act(planned, live.cluster)
    assert cluster.pods() == {"a", "b", "small", "big"}
    assert cluster.nominated("n2") is None


async def test_one_round_per_queue_per_cooldown(make: Make) -> None:
    cluster, defragger, live = make(evict=False)
    await cluster.rig.executor.start_cycle()
    planned = cluster.planned(live)
    await defragger.act(planned, live.cluster)
    await cluster.rig.executor.start_cycle()
    await defragger.act(planned, live.cluster)  # the same queue, within cooldown_s
    assert cluster.rig.reasons("small").count("WouldEvict") == 1
    (refused,) = [e for e in cluster.rig.events("big") if e["reason"] == "EvictionRefused"]
    assert "cooling down" in refused["message"]


async def test_a_queue_an_earlier_leader_cooled_gets_no_migration_planned(make: Make) -> None:
    """This leader's executor ran no round; the shared Lease says an earlier one did, for
    the queue of ``big``: the round is planned under that cooldown, not only refused when
    carried out."""
    cluster, defragger, live = make(evict=True, share=True)
    until = cluster.rig.clock.wall() + 120
    cluster.rig.seen.observe(json.dumps({"default": ann.timestamp(until)}))
    await cluster.rig.executor.start_cycle()
    planned = await defragger.cycle(live.cluster)
    assert planned is not None
    (answer,) = planned.answers
    assert not hasattr(answer.answer, "node"), answer
    assert "cooling down" in str(answer.answer)
    assert cluster.pods() == {"a", "b", "small", "big"}


async def test_a_queue_whose_plans_need_approval_waits_for_one(make: Make) -> None:
    cluster, defragger, live = make(
        evict=True, queue_weights={"default": 10}, approval_weight_above=5
    )
    await cluster.rig.executor.start_cycle()
    await defragger.act(cluster.planned(live), live.cluster)
    assert cluster.pods() == {"a", "b", "small", "big"}
    assert "MigrationPlanProposed" in cluster.rig.reasons("big")
    assert "PreemptionPlanProposed" not in cluster.rig.reasons("big")


async def test_a_pod_with_no_migration_is_told_why_once(make: Make) -> None:
    cluster, defragger, live = make(evict=True)
    cluster.pod("huge", None, gpus="9")  # more GPUs than any node has
    live = cluster.live()
    await cluster.rig.executor.start_cycle()
    planned = cluster.planned(live)
    await defragger.act(planned, live.cluster)
    await defragger.act(planned, live.cluster)
    (told,) = [e for e in cluster.rig.events("huge") if e["reason"] == "EvictionNotPlanned"]
    assert told["message"].startswith("defrag: no node could take default/huge")
    said = [d for d in cluster.rig.log if d.subject == "default/huge"]
    assert [d.decision for d in said] == ["refused"]  # once, not every cycle


async def test_a_migration_whose_pod_left_while_it_was_planned_is_dropped(make: Make) -> None:
    cluster, defragger, live = make(evict=True)
    planned = cluster.planned(live)
    small = cluster.kube.store.get(PODS, "default", "small")
    live.cluster.remove_pod(small)  # the watch saw it go after the fork
    await cluster.rig.executor.start_cycle()
    await defragger.act(planned, live.cluster)
    assert cluster.pods() == {"a", "b", "small", "big"}
    assert cluster.rig.events("small") == [] and cluster.nominated("n2") is None


def test_a_round_promises_each_migrations_room_to_its_pod(make: Make) -> None:
    cluster, _, _ = make(evict=False)
    cluster.pod("twin", None, gpus="8")  # wants the same room as big
    planned = cluster.planned(cluster.live())
    answers = {a.pod: a.answer for a in planned.answers}
    assert getattr(answers["default/big"], "node", None) == "n2"
    # n2 is big's; n1 receives big's moved pod: no room is counted twice.
    assert not hasattr(answers["default/twin"], "node"), answers["default/twin"]
