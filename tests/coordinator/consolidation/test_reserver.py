"""The moved pods' new homes reserved for their replacements, wired as the leader wires it
— the defragmenter and the drainer handing rounds to the eviction executor, the eviction
cycle's writer of the nominations annotation, the fenced Event recorder — against the
API emulator: a dry run reserves nothing, a carried-out migration reserves each moved
pod's destination (keyed by its namespace and its controller's uid), and the leader ends
a reservation when the replacement is bound, when the plan is dropped and when it
expires, telling each on the node.

The cluster is :class:`tests.coordinator.consolidation.test_defragger.Cluster`'s: ``small``
(one GPU, on n2, of the ReplicaSet ``rs-uid``) moves to n1 so that the pending 8-GPU
``big`` fits on n2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client

from common import annotations as ann
from coordinator.config import DefragSettings, DrainSettings, EventSettings, EvictionSettings
from coordinator.consolidation import reservedview
from coordinator.consolidation.defragger import Defragger
from coordinator.consolidation.drain import DISRUPTED, Move
from coordinator.consolidation.drainer import Drainer
from coordinator.consolidation.reserver import (
    EXPIRED,
    RELEASED,
    RESERVED,
    Reserver,
    for_drain,
)
from coordinator.consolidation.taint import taint_writer
from coordinator.eviction.cycle import Cycle
from coordinator.kube.events import EventRecorder
from coordinator.live import nominations
from coordinator.services import SERVICES
from hack.kubeapi import KubeApi, objects
from hack.kubeapi.resources import NODES
from tests.coordinator.consolidation.drainrig import REPLICASET
from tests.coordinator.consolidation.test_defragger import ON, Cluster
from tests.coordinator.eviction.evictrig import EvictRig
from tests.coordinator.eviction.executorrig import Rig, kube

__all__ = ["kube"]  # the emulator fixture

TTL_S = 90.0


class Leader:
    """The leader's parts over one emulated cluster."""

    def __init__(self, kube: KubeApi, evict: bool, defrag: DefragSettings) -> None:
        self.settings = EvictionSettings(enabled=evict, reservation_ttl_s=TTL_S)
        self.rig = Rig(kube, enabled=evict, reservation_ttl_s=TTL_S)
        self.cluster = Cluster(kube, self.rig, self.settings)
        self.live: EvictRig = self.cluster.live(defrag)
        cycle = Cycle(self.live.cluster, self.rig.executor)
        events = EventRecorder(
            client.CoreV1Api(self.rig.client), self.rig.fence, self.rig.clock, EventSettings(),
            self.rig.metrics,
        )  # fmt: skip
        self.reserver = Reserver(self.live.cluster, self.settings, cycle.write, events)
        self.defragger = Defragger(
            defrag, self.settings, self.rig.executor, cycle.nominate, self.rig.clock,
            self.reserver,
        )  # fmt: skip
        self.drainer = Drainer(
            DrainSettings(enabled=True), self.settings, self.rig.executor,
            taint_writer(self.rig.client), events, self.rig.fence, self.rig.clock, self.reserver,
        )  # fmt: skip

    async def migrate(self) -> None:
        await self.rig.executor.start_cycle()
        await self.defragger.act(self.cluster.planned(self.live), self.live.cluster)

    def reserved(self, node: str) -> tuple[nominations.Nomination, ...]:
        """The reservations of ``node``'s annotation, as the API server has it."""
        text = self.cluster.nominated(node)
        return tuple(e for e in nominations.parse(node, text) if e.reservation) if text else ()

    def replacement(self, name: str, node: str | None = None, **meta: Any) -> None:
        """A pod of ``small``'s ReplicaSet, as the Pod watch delivers it: pending, or bound
        to ``node``."""
        obj = objects.pod(
            name, node=node, phase="Running" if node else "Pending",
            requests={"cpu": "1", "memory": "1Gi"}, limits={"nvidia.com/gpu": "1"},
            priority=1_000,
        )  # fmt: skip
        obj["metadata"]["ownerReferences"] = [{**REPLICASET, "controller": True}]
        obj["metadata"].update(uid=f"uid-{name}", **meta)
        self.live.pods(obj)

    def moved(self) -> None:
        """The watch saying ``small`` is gone (evicted)."""
        self.live.cluster.remove_pod({"metadata": {"namespace": "default", "name": "small",
                                                   "uid": self.uid("small")}})  # fmt: skip

    def uid(self, name: str) -> str:
        found = self.live.cluster.facts_named(f"default/{name}")
        assert found is not None
        return found.uid


Make = Callable[..., Leader]


@pytest.fixture
def make(kube: KubeApi) -> Iterator[Make]:
    made: list[Leader] = []

    def build(*, evict: bool, defrag: DefragSettings = ON) -> Leader:
        leader = Leader(kube, evict, defrag)
        made.append(leader)
        return leader

    yield build
    for leader in made:
        leader.rig.close()


async def test_a_dry_run_reserves_nothing(make: Make) -> None:
    leader = make(evict=False)
    await leader.migrate()
    assert "WouldEvict" in leader.rig.reasons("small")  # the round was considered
    assert leader.reserved("n1") == ()
    assert RESERVED not in leader.rig.reasons("n1")


async def test_a_carried_out_migration_reserves_each_moved_pods_new_home(make: Make) -> None:
    leader = make(evict=True)
    await leader.migrate()
    assert leader.cluster.pods() == {"a", "b", "big"}
    now = leader.live.clock.wall()
    (entry,) = leader.reserved("n1")
    assert entry == nominations.Nomination(
        "default/small", REPLICASET["uid"], "n1", float(int(now + TTL_S)), "default/big"
    )
    (told,) = [e for e in leader.rig.events("n1") if e["reason"] == RESERVED]
    assert "replacement of default/small" in told["message"]
    assert "default/big" in told["message"]
    # The leader's own view holds it at once, for the replacement when it comes:
    leader.moved()
    leader.replacement("small-2")
    assert leader.live.cluster.reserved_node(leader.uid("small-2"), "default", "rs-uid") == "n1"


async def test_the_reservation_ends_once_the_replacement_is_bound(make: Make) -> None:
    leader = make(evict=True)
    await leader.migrate()
    await leader.reserver.tidy()
    assert len(leader.reserved("n1")) == 1  # small not gone yet (terminating)
    leader.moved()
    leader.replacement("small-2")
    await leader.reserver.tidy()
    assert len(leader.reserved("n1")) == 1  # pending: still held for it
    leader.replacement("small-2", node="n1")
    await leader.reserver.tidy()
    assert leader.reserved("n1") == ()
    assert "default/big@" in (leader.cluster.nominated("n2") or "")  # not the tidy's
    (told,) = [e for e in leader.rig.events("n1") if e["reason"] == RELEASED]
    assert "its replacement was placed" in told["message"]


async def test_the_reservation_ends_when_the_pod_it_was_made_for_is_gone(make: Make) -> None:
    leader = make(evict=True)
    await leader.migrate()
    leader.moved()
    leader.replacement("small-2")
    leader.live.cluster.remove_pod(
        {"metadata": {"namespace": "default", "name": "big", "uid": leader.uid("big")}}
    )
    await leader.reserver.tidy()
    assert leader.reserved("n1") == ()
    (told,) = [e for e in leader.rig.events("n1") if e["reason"] == RELEASED]
    assert "default/big, which the migration made room for, is gone" in told["message"]


async def test_an_unused_reservation_expires(make: Make) -> None:
    leader = make(evict=True)
    await leader.migrate()
    leader.moved()
    leader.replacement("small-2")  # pending, but never bound
    leader.live.clock.advance(TTL_S - 1)
    await leader.reserver.tidy()
    assert len(leader.reserved("n1")) == 1
    leader.live.clock.advance(1)
    uid = leader.uid("small-2")
    assert leader.live.cluster.reserved_node(uid, "default", "rs-uid") is None  # not held
    await leader.reserver.tidy()
    assert leader.reserved("n1") == ()
    (told,) = [e for e in leader.rig.events("n1") if e["reason"] == EXPIRED]
    assert f"not used within {TTL_S:g}s" in told["message"]


async def test_a_drains_reservations_end_when_the_drain_is_abandoned(make: Make) -> None:
    leader = make(evict=True)
    tainted = objects.node("n3", capacity={"cpu": "8", "memory": "8Gi", "pods": "110"},
                           taints=[{"key": DISRUPTED, "effect": "NoSchedule"}])  # fmt: skip
    leader.cluster.kube.store.create(NODES, tainted)
    leader.live.nodes(tainted)
    written = await leader.reserver.reserve(
        [Move(leader.uid("small"), "default/small", "n1")], for_drain("n3")
    )
    assert [e.made_for for e in written] == ["drain/n3"]
    leader.replacement("small-2")
    await leader.reserver.tidy()
    assert len(leader.reserved("n1")) == 1  # n3 still draining
    leader.live.nodes(objects.node("n3", capacity={"cpu": "8", "memory": "8Gi", "pods": "110"}))
    await leader.reserver.tidy()
    assert leader.reserved("n1") == ()
    (told,) = [e for e in leader.rig.events("n1") if e["reason"] == RELEASED]
    assert "the drain of n3 was abandoned" in told["message"]


async def test_a_moved_pod_without_a_controller_gets_no_reservation(make: Make) -> None:
    leader = make(evict=True)
    bare = objects.pod("bare", node="n2", requests={"cpu": "1", "memory": "1Gi"})
    bare["metadata"]["uid"] = "uid-bare"
    leader.live.pods(bare)
    assert (
        await leader.reserver.reserve([Move(leader.uid("bare"), "default/bare", "n1")], "x") == []
    )
    assert leader.reserved("n1") == ()


@pytest.mark.parametrize("evict", [False, True], ids=["dry-run", "enabled"])
async def test_a_drain_reserves_its_pods_new_homes_once_carried_out(
    make: Make, evict: bool
) -> None:
    leader = make(evict=evict)
    await leader.rig.executor.start_cycle()
    plan = await leader.drainer.run(leader.live.view(), ["n2"])
    assert plan is not None
    assert [(m.pod, m.destination) for d in plan.drains for m in d.moves] == [
        ("default/small", "n1")
    ]
    if not evict:
        assert leader.reserved("n1") == ()
        return
    (entry,) = leader.reserved("n1")
    assert (entry.pod, entry.uid, entry.made_for) == ("default/small", "rs-uid", "drain/n2")


async def test_debug_shows_the_room_held_for_whom_and_until_when(
    make: Make, aiohttp_client: Any
) -> None:
    leader = make(evict=True)
    await leader.migrate()
    leader.moved()
    leader.replacement("small-2")
    app = web.Application()
    app[SERVICES] = leader.live.services()
    reservedview.add_routes(app)
    http = await aiohttp_client(app)
    reply = await http.get(reservedview.PATH)
    assert reply.status == 200
    held = {(h["node"], h["kind"]): h for h in (await reply.json())["held"]}
    until = ann.timestamp(int(leader.live.clock.wall() + TTL_S))
    assert held[("n1", "reservation")] == {
        "node": "n1",
        "kind": "reservation",
        "pod": "default/small",
        "controller_uid": "rs-uid",
        "made_for": "default/big",
        "until": until,
        "expired": False,
        "holds_for": {"pod": "default/small-2", "uid": "uid-small-2", "cpu_m": 1000,
                      "mem_b": 2**30, "gpus": 1},
    }  # fmt: skip
    assert held[("n2", "nomination")]["holds_for"]["pod"] == "default/big"
