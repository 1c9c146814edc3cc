"""The eviction executor wired as the leader wires it — the real client, Evictor, Event
recorder and approval reader — against the API emulator, on a fake clock; plans made by
hand."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from coordinator.config import EventSettings, EvictionSettings
from coordinator.decisionlog import DecisionLog
from coordinator.eviction.answers import Level, Plan, Victim
from coordinator.eviction.executor import Executor, Sharing
from coordinator.eviction.webhook import ApprovalHook
from coordinator.kube.approvals import ApprovalReader
from coordinator.kube.client import api_client
from coordinator.kube.cooldowns import CooldownLease
from coordinator.kube.events import EventRecorder
from coordinator.kube.evictions import Evictor
from coordinator.kube.leader import Fence
from coordinator.live import cooldowns
from coordinator.live.cooldowns import SharedCooldowns
from coordinator.metrics import CoordinatorMetrics
from hack.kubeapi import KubeApi, objects
from hack.kubeapi.resources import EVENTS, LEASES, PODS
from tests.hosts import FakeClock

COORDINATOR_NS = "stowage-system"


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        api.add_namespace(COORDINATOR_NS)
        yield api


class Rig:
    def __init__(
        self, kube: KubeApi, *, share: bool = False, hook: ApprovalHook | None = None,
        clock: FakeClock | None = None, **settings: Any,
    ) -> None:  # fmt: skip
        """``share``: the cooldowns shared through the Lease in the coordinator's namespace
        (:attr:`seen` is that Lease as a watch would have it, fed by :meth:`watched`);
        ``hook``: the approval webhook's, on ``clock``."""
        self.kube = kube
        self.clock = clock or FakeClock()
        fence = Fence(1e9, self.clock.monotonic)
        fence.renewed(self.clock.monotonic())
        self.fence = fence
        self.client = api_client(host=kube.url)
        self.seen = SharedCooldowns()
        lease = CooldownLease(self.client, COORDINATOR_NS, fence)
        evictor = Evictor(self.client, fence)
        self.metrics = CoordinatorMetrics()
        events = EventRecorder(
            client.CoreV1Api(self.client), fence, self.clock, EventSettings(), self.metrics,
        )  # fmt: skip
        self.log = DecisionLog()
        self.executor = Executor(
            EvictionSettings(**settings), evictor, events, evictor,
            ApprovalReader(self.client, COORDINATOR_NS), self.metrics, self.clock, self.log,
            Sharing(self.seen, lease) if share else None, hook,
        )  # fmt: skip

    def lease(self) -> dict[str, Any] | None:
        """The shared cooldowns' Lease as the API server has it, if it exists."""
        return self.kube.store.find(LEASES, COORDINATOR_NS, cooldowns.LEASE)

    def shared(self) -> dict[str, float]:
        """What the Lease says: queue → until (Unix seconds)."""
        lease = self.lease()
        text = ((lease or {}).get("metadata", {}).get("annotations") or {}).get(cooldowns.KEY)
        return cooldowns.parse(text) if text else {}

    def watched(self, seen: SharedCooldowns) -> None:
        """The Lease as it is now, delivered to ``seen`` as a watch would."""
        lease = self.lease()
        seen.replace([lease] if lease is not None else [])

    def pod(
        self, name: str, node: str | None = "n1", namespace: str = "default",
        owner: str | None = None, **fields: Any,
    ) -> Victim:  # fmt: skip
        obj = objects.pod(name, namespace, node=node, **fields)
        if owner is not None:
            obj["metadata"]["ownerReferences"] = [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner,
                 "controller": True}
            ]  # fmt: skip
        self.kube.add_namespace(namespace)
        uid = self.kube.store.create(PODS, obj)["metadata"]["uid"]
        return Victim(uid, namespace, name, node or "", Level.LOW, 0, namespace, None, None, "low")

    def exists(self, victim: Victim) -> bool:
        pods = self.kube.store.list(PODS, victim.namespace)[0]
        return any(p["metadata"]["uid"] == victim.uid for p in pods)

    def events(self, name: str) -> list[dict[str, Any]]:
        return [
            e for e in self.kube.store.list(EVENTS, None)[0] if e["involvedObject"]["name"] == name
        ]

    def reasons(self, name: str) -> list[str]:
        return [e["reason"] for e in self.events(name)]

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
