"""The leader tells the hints of namespace queues — an Event about the Namespace, whose
message carries the pairs a Queue's annotation would, and the metrics — through the real
client against the API emulator (which serves no Volcano Queues: the queues here are
namespace queues). The Namespaces refuse every request, as the real API server does
under the shipped RBAC (no grant on namespaces): the teller never sends one. Fenced,
rate-limited, cleared once a queue has room, and told once more in a new term."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import generate_latest

from common import annotations as ann
from coordinator.autoscale import teller
from coordinator.config import AutoscaleSettings, EventSettings
from coordinator.kube.client import api_client
from coordinator.kube.events import EventRecorder
from coordinator.kube.leader import Fence
from hack.kubeapi import KubeApi
from hack.kubeapi.faults import Fault
from hack.kubeapi.resources import EVENTS, NAMESPACES
from tests.coordinator.autoscale.rig import A100, POOL, TOLERATE, Rig, pod, quota

NAMESPACES_ = ("batch", "team-b", "team-c", "gpu-team")
BATCH = {"group": f"{POOL}:cpu", "nodes": "2", "gap": "cpu:46"}
"""batch's hint (tests/coordinator/autoscale/test_hints.py): 46 CPUs lacking, 2 cpu nodes."""


class Tell:
    def __init__(self, kube: KubeApi, api: Any, refused: Fault, **settings: Any) -> None:
        self.kube = kube
        self.refused = refused
        self.rig = Rig()
        self.rig.capacities.remove_queue({"metadata": {"name": "research"}})
        self.settings = AutoscaleSettings(**{"max_patches_per_s": 10.0, **settings})
        clock = self.rig.clock
        self.fence = Fence(1e9, clock.monotonic)
        self.fence.renewed(clock.monotonic())
        recorder = EventRecorder(
            client.CoreV1Api(api), self.fence, clock, EventSettings(), self.rig.metrics
        )
        self.teller = teller.Teller(
            teller.annotated(api), teller.patcher(api), recorder, self.fence, self.settings, clock
        )
        self.term = False

    async def tell(self) -> int:
        if not self.term:
            assert await self.teller.start_term()
            self.term = True
        self.rig.clock.advance(10.0)  # a full patch budget
        return await self.teller.tell(self.rig.plan(max_patches_per_s=10.0))

    def annotations(self, namespace: str) -> dict[str, str]:
        obj = self.kube.store.get(NAMESPACES, "", namespace)
        return dict(obj["metadata"].get("annotations") or {})

    def told(self, namespace: str) -> list[str]:
        """The messages of the ScaleHint Events about ``namespace``, oldest first."""
        items = self.kube.store.list(EVENTS, "default")[0]
        return [
            e["message"]
            for e in sorted(items, key=lambda e: (e["lastTimestamp"], e["metadata"]["name"]))
            if (e["involvedObject"]["kind"], e["involvedObject"]["name"])
            == ("Namespace", namespace)
            and e["reason"] == teller.TOLD
        ]

    def hint(self, namespace: str) -> dict[str, str] | None:
        """The pairs of the latest ScaleHint Event about ``namespace``."""
        said = self.told(namespace)
        return ann.parse(said[-1].split(" ", 1)[0])[0] if said else None

    def events(self) -> list[tuple[str, str, str, str]]:
        items = self.kube.store.list(EVENTS, "default")[0]
        return sorted(
            (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["reason"])
            for e in items
        )


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        for name in NAMESPACES_:
            api.store.create(NAMESPACES, {"metadata": {"name": name}})
        yield api


@pytest.fixture
def make(kube: KubeApi) -> Iterator[Any]:
    # Any request on a Namespace object (list, get, patch) refused, as under the shipped RBAC.
    refused = kube.faults.add(Fault.error(403, path=r"^/api/v1/namespaces(/[^/]+)?$", times=None))
    with api_client(host=kube.url) as api:
        yield lambda **settings: Tell(kube, api, refused, **settings)
    assert refused.hits == 0, "a Namespace was read or written"


async def test_a_queue_short_of_room_is_told_once_and_cleared_when_it_has_room(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="coordinator.autoscale.teller")
    t = make()
    assert await t.tell() == 1  # batch alone lacks room; team-b has room
    (said,) = t.told("batch")
    value, reason = said.split(" ", 1)
    assert ann.parse(value) == (BATCH, ann.timestamp(t.rig.clock.wall()))
    assert reason == t.rig.hint("batch").reason
    assert t.told("team-b") == []
    assert t.events() == [
        ("Namespace", "batch", "Normal", "ScaleHint"),
        ("Namespace", "team-c", "Warning", "ScaleDeadlock"),  # its pod selects gpu-h100
    ]
    assert await t.tell() == 0  # told: nothing more, no Event again
    assert len(t.events()) == 2
    said = [r.getMessage() for r in caplog.records if "scale deadlock" in r.getMessage()]
    assert len(said) == 1  # the deadlock, once while it lasts (the budget is not spent again)

    for i in (1, 2, 3):  # batch's pending pods are placed elsewhere: room again
        t.rig.cluster.remove_pod(pod(f"b{i}", "batch", 20))
    assert await t.tell() == 1
    assert ("Namespace", "batch", "Normal", "ScaleHintCleared") in t.events()
    assert await t.tell() == 0  # cleared once
    assert [e for e in t.events() if e[3] == teller.CLEARED] == [
        ("Namespace", "batch", "Normal", "ScaleHintCleared")
    ]
    assert all(t.annotations(n) == {} for n in NAMESPACES_)  # nothing written on one
    assert t.refused.hits == 0


async def test_a_changed_hint_is_told_again(make: Any) -> None:
    t = make()
    await t.tell()
    t.rig.cluster.upsert_pod(pod("b4", "batch", 20, selector={POOL: "cpu"}))
    # 4 × 20 + 2 × 20 = 120 wanted, 54 free: 66 lacking, ceil(66 / 32) = 3 nodes.
    assert await t.tell() == 1
    assert t.hint("batch") == {"group": f"{POOL}:cpu", "nodes": "3", "gap": "cpu:66"}
    assert len(t.told("batch")) == 2


async def test_without_the_lease_nothing_is_told(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="coordinator.autoscale.teller")
    t = make()
    t.fence.revoke()
    assert await t.tell() == 0
    assert t.teller.told == {} and t.events() == []
    assert caplog.records == []  # the round stopped at the first refusal: no deadlock tried


async def test_an_event_held_back_is_told_next_round(make: Any, kube: KubeApi) -> None:
    t = make()
    refused = kube.faults.add(Fault.error(500, method="POST", path=r"/events$"))
    assert await t.tell() == 0  # the one Event failed: batch is not told
    assert refused.hits == 1 and t.told("batch") == []
    assert await t.tell() == 1
    assert t.hint("batch") == BATCH


def _gpu_team_pending(t: Any) -> None:
    t.rig.capacities.upsert_quota(quota("gpu-team", "q", {"requests.nvidia.com/gpu": "16"}, {}))
    # 2 GPUs pending (A100) + 2 × 2 reserve = 6 wanted, g2 has 4 free: 1 a100 node.
    t.rig.cluster.upsert_pod(pod("g", "gpu-team", 1, 2, selector=A100, tolerations=TOLERATE))


async def test_a_round_may_spend_what_a_rounds_time_earns(make: Any) -> None:
    """At the defaults' rate (one a second) and a round every 60 s, two queues due in
    one round are both told in it, not one a round."""
    t = make(max_patches_per_s=1.0)
    _gpu_team_pending(t)
    assert await t.teller.start_term()
    assert await t.teller.tell(t.rig.plan()) == 2
    assert (t.hint("batch"), t.hint("gpu-team") is not None) == (BATCH, True)


async def test_tellings_wait_for_the_budget(make: Any) -> None:
    t = make(max_patches_per_s=0.5, interval_s=2.0)  # one token a round, one every 2 s
    _gpu_team_pending(t)
    assert await t.teller.start_term()
    t.rig.clock.advance(2.0)
    hints = t.rig.plan()
    assert await t.teller.tell(hints) == 1
    assert (t.hint("batch"), t.hint("gpu-team")) == (BATCH, None)  # sorted by queue
    assert await t.teller.tell(hints) == 0  # no token left, and the deadlock waits too
    assert [e[1] for e in t.events()] == ["batch"]
    t.rig.clock.advance(2.0)
    assert await t.teller.tell(hints) == 1
    assert t.hint("gpu-team") == {
        "group": f"{POOL}:gpu-a100",
        "nodes": "1",
        "gap": "nvidia.com/gpu:2",
    }


async def test_a_new_term_tells_a_namespace_once_more_and_leaves_its_annotations_alone(
    make: Any, kube: KubeApi
) -> None:
    """A term keeps what it told the namespaces in memory only; an annotation an older
    release wrote on a Namespace is neither read nor cleared (no grant to)."""
    t = make()
    for namespace in ("team-b", "batch"):

        def leftover(obj: dict[str, Any]) -> dict[str, Any]:
            obj["metadata"]["annotations"] = {ann.SCALE_HINT: ann.value(BATCH, 0)}
            obj["metadata"]["resourceVersion"] = ""
            return obj

        kube.store.update(NAMESPACES, "", namespace, leftover)
    assert await t.tell() == 1  # batch, though its Namespace carries that very hint
    assert t.hint("batch") == BATCH
    assert await t.tell() == 0
    assert await t.teller.start_term()  # a new term: nothing told yet
    assert await t.tell() == 1
    assert len(t.told("batch")) == 2
    assert t.told("team-b") == []  # room enough: no hint, no clearing
    assert [e for e in t.events() if e[3] == teller.CLEARED] == []
    for namespace in ("team-b", "batch"):
        assert t.annotations(namespace) == {ann.SCALE_HINT: ann.value(BATCH, 0)}


def test_the_metrics_carry_each_hint_and_deadlock_and_drop_a_settled_queue() -> None:
    rig = Rig()
    teller.publish(rig.plan(), rig.metrics)
    text = generate_latest(rig.metrics.registry).decode()
    assert 'stowage_scale_hint_nodes{group="karpenter.sh/nodepool:cpu",queue="batch"} 2.0' in text
    assert (
        'stowage_scale_hint_nodes{group="karpenter.sh/nodepool:gpu-a100",queue="research"} 2.0'
        in text
    )
    assert 'stowage_scale_hint_gap{queue="batch",resource="cpu"} 46.0' in text
    assert 'stowage_scale_hint_gap{queue="research",resource="nvidia.com/gpu"} 16.0' in text
    assert 'stowage_scale_deadlocked_pods{queue="team-c"} 1.0' in text
    assert 'queue="team-b"' not in text  # room enough: no series
    for i in (1, 2, 3):
        rig.cluster.remove_pod(pod(f"b{i}", "batch", 20))
    teller.publish(rig.plan(), rig.metrics)
    assert 'queue="batch"' not in generate_latest(rig.metrics.registry).decode()
