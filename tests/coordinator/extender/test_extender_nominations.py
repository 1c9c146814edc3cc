"""The room a preemption freed, held for its preemptor by every scheduler endpoint.

gpu-1 (64 CPUs, 512 GiB, 8 A100s) is empty and carries a nomination (its Node
annotation, as the leader writes it) of the pending pod ``ns/nominee``, priority 1,000,
which needs nearly all of it. Another
pod of no higher priority asking for GPUs is refused there; the nominee itself, and a
pod of higher priority (kube-scheduler's rule), are not. An expired nomination, or one
naming a pod that is bound already, holds nothing.
"""

from __future__ import annotations

from typing import Any

from coordinator.extender import volcano
from coordinator.live import nominations
from tests.coordinator.extender.conftest import Rig
from tests.coordinator.extender.kubejson import NODES, pod

FILTER = "/scheduler/filter"
PRIORITIZE = "/scheduler/prioritize"
NOMINEE_UID = "uid-nominee"


def with_priority(obj: dict[str, Any], priority: int) -> dict[str, Any]:
    """A copy of the pod ``obj`` with ``spec.priority``."""
    return {**obj, "spec": {**obj["spec"], "priority": priority}}


def nominee(bound_to: str | None = None) -> dict[str, Any]:
    obj = with_priority(pod("60", "500Gi", gpus=8, name="nominee", uid=NOMINEE_UID), 1_000)
    if bound_to:
        obj["spec"]["nodeName"] = bound_to
        obj["status"] = {"phase": "Running"}
    return obj


def nominate(rig: Rig, until_s: float) -> None:
    """gpu-1's Node, as the watch delivers it, with ``ns/nominee`` nominated there."""
    entry = nominations.Nomination("ns/nominee", NOMINEE_UID, "gpu-1", rig.clock.wall() + until_s)
    text = nominations.value((entry,), rig.clock.wall())
    assert text is not None
    node = {**NODES["gpu-1"]}
    node["metadata"] = {**node["metadata"], "annotations": {nominations.KEY: text}}
    rig.cluster.upsert_node(node)
    rig.cluster.upsert_pod(nominee())


async def gpu_1_passes(rig: Rig, asking: dict[str, Any]) -> bool:
    status, reply = await rig.post(FILTER, {"Pod": asking, "NodeNames": ["gpu-1"]})
    assert status == 200, reply
    return reply["NodeNames"] == ["gpu-1"]


async def test_the_room_is_held_for_the_nominee_alone(rig: Rig) -> None:
    other = with_priority(pod("1", "1Gi", gpus=1, name="other", uid="uid-other"), 1_000)
    assert await gpu_1_passes(rig, other)  # before: 8 free GPUs
    nominate(rig, until_s=60)
    assert not await gpu_1_passes(rig, other)
    assert await gpu_1_passes(rig, with_priority(other, 1_001))  # more important: it may
    assert not await gpu_1_passes(rig, other)  # and nothing stayed changed
    assert await gpu_1_passes(rig, nominee())


async def test_prioritize_and_volcano_hold_it_too(rig: Rig) -> None:
    other = with_priority(pod("1", "1Gi", name="other", uid="uid-other"), 0)
    body = {"Pod": other, "NodeNames": ["gpu-1", "gpu-2"]}
    status, before = await rig.post(PRIORITIZE, body)
    assert status == 200 and before[0] == {"Host": "gpu-1", "Score": 0}, before
    nominate(rig, until_s=60)
    status, after = await rig.post(PRIORITIZE, body)
    assert status == 200
    assert after[0] == {"Host": "gpu-1", "Score": 10}, after  # the full node it is to be
    gpus = with_priority(pod("1", "1Gi", gpus=1, name="other", uid="uid-other"), 0)
    task = {"uid": "uid-other", "pod": gpus}
    body = {"task": task, "node": {"name": "gpu-1", "node": NODES["gpu-1"]}}
    status, reply = await rig.post(f"{volcano.PREFIX}/predicate", body)
    assert status == 200 and reply.get("code", 0) != 0, reply


async def test_an_expired_nomination_holds_nothing(rig: Rig) -> None:
    other = with_priority(pod("1", "1Gi", gpus=1, name="other", uid="uid-other"), 0)
    nominate(rig, until_s=60)
    rig.clock.advance(61)
    assert await gpu_1_passes(rig, other)


async def test_a_nominee_bound_elsewhere_holds_nothing_here(rig: Rig) -> None:
    other = with_priority(pod("1", "1Gi", gpus=1, name="other", uid="uid-other"), 0)
    nominate(rig, until_s=60)
    rig.cluster.upsert_pod(nominee(bound_to="gpu-2"))
    assert await gpu_1_passes(rig, other)


def test_annotations_that_are_not_stowage_nominations_hold_nothing() -> None:
    at = "2026-12-07T13:05:00Z"
    assert nominations.parse("n", f"ns/p@u={at};at={at}") == (
        nominations.Nomination("ns/p", "u", "n", 1_796_648_700.0),
    )
    for text in (
        f"p@u={at};at={at}",  # no namespace
        f"ns/p={at};at={at}",  # no uid
        f"ns/p@u=soon;at={at}",  # not a time
        ",".join(f"ns/p{k}@u{k}={at}" for k in range(nominations.MAX_PER_NODE + 1)) + f";at={at}",
        "x" * (nominations.MAX_VALUE_B + 1),
    ):
        assert nominations.parse("n", text) == (), text
