"""A moved pod's new home, reserved for its replacement, as every scheduler endpoint
holds it: the filter and prioritize steer the replacement there and keep other pods off
the room — by the namespace and the controller's uid alone.

gpu-1 (64 CPUs, 512 GiB, 8 A100s) and gpu-2 (2 CPUs, 16 GiB, 4 A100s) are empty; gpu-1
carries a reservation (its Node annotation, as the leader writes it) for the replacement
of ``ns/web-old``, whose controller is the ReplicaSet ``rs-uid``. The replacement asks for
1 CPU, 1 GiB and 4 GPUs: it fits on both nodes, and the reservation sends it to gpu-1 and
holds 4 of gpu-1's GPUs from the others.
"""

from __future__ import annotations

from typing import Any

from coordinator.live import nominations
from tests.coordinator.extender.conftest import Rig
from tests.coordinator.extender.kubejson import NODES, pod

FILTER = "/scheduler/filter"
PRIORITIZE = "/scheduler/prioritize"
CONTROLLER = "rs-uid"
LABELS = {"app": "web", "pod-template-hash": "7d9c"}


def replica(
    name: str, uid: str, namespace: str = "ns", controller: str | None = CONTROLLER, gpus: int = 4
) -> dict[str, Any]:
    """A pending pod of the ReplicaSet ``controller`` (none: a pod with its labels only)."""
    obj: dict[str, Any] = pod("1", "1Gi", gpus=gpus, name=name, uid=uid)
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["labels"] = dict(LABELS)
    if controller is not None:
        obj["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-7d9c",
                "uid": controller,
                "controller": True,
            }  # fmt: skip
        ]
    return obj


def reserve(rig: Rig, until_s: float, *nodes: str) -> None:
    """The Nodes, as the watch delivers them, each with a reservation for a replacement of
    ``ns/web-old``."""
    for name in nodes:
        entry = nominations.Nomination(
            "ns/web-old", CONTROLLER, name, rig.clock.wall() + until_s, "ns/big"
        )
        text = nominations.value((entry,), rig.clock.wall())
        assert text is not None
        node = {**NODES[name]}
        node["metadata"] = {**node["metadata"], "annotations": {nominations.KEY: text}}
        rig.cluster.upsert_node(node)


async def filtered(rig: Rig, asking: dict[str, Any]) -> list[str]:
    status, reply = await rig.post(FILTER, {"Pod": asking, "NodeNames": ["gpu-1", "gpu-2"]})
    assert status == 200, reply
    return list(reply["NodeNames"])


async def prioritized(rig: Rig, asking: dict[str, Any]) -> dict[str, int]:
    status, reply = await rig.post(PRIORITIZE, {"Pod": asking, "NodeNames": ["gpu-1", "gpu-2"]})
    assert status == 200, reply
    return {h["Host"]: h["Score"] for h in reply}


async def test_the_replacement_is_steered_to_its_reserved_home(rig: Rig) -> None:
    replacement = replica("web-new", "uid-new")
    rig.cluster.upsert_pod(replacement)
    assert await filtered(rig, replacement) == ["gpu-1", "gpu-2"]  # before: either fits
    reserve(rig, 60, "gpu-1")
    assert await filtered(rig, replacement) == ["gpu-1"]
    assert await prioritized(rig, replacement) == {"gpu-1": 10, "gpu-2": 0}


async def test_a_replacement_the_pod_watch_has_not_seen_yet_is_steered_too(rig: Rig) -> None:
    reserve(rig, 60, "gpu-1")
    assert await filtered(rig, replica("web-new", "uid-new")) == ["gpu-1"]


async def test_other_pods_are_kept_off_the_reserved_room(rig: Rig) -> None:
    rig.cluster.upsert_pod(replica("web-new", "uid-new"))
    reserve(rig, 60, "gpu-1")
    other = pod("1", "1Gi", gpus=5, name="other", uid="uid-other")  # 5 of gpu-1's 8: 4 held
    assert await filtered(rig, other) == []  # gpu-2 has 4
    assert await filtered(rig, pod("1", "1Gi", gpus=4, name="other", uid="uid-other")) == [
        "gpu-1",
        "gpu-2",
    ]


async def test_a_pod_with_the_replicas_labels_but_not_its_controller_is_not(rig: Rig) -> None:
    """Labels are the pod owner's word: a pod wearing the replicas' labels, without their
    controller, or naming it from another namespace, is neither steered nor let into the
    room."""
    rig.cluster.upsert_pod(replica("web-new", "uid-new"))
    reserve(rig, 60, "gpu-1")
    forged = {"controller": None}, {"namespace": "other-team"}
    for how in forged:
        asking = replica("look-alike", "uid-forged", **how)  # type: ignore[arg-type]
        rig.cluster.upsert_pod(asking)
        assert await filtered(rig, asking) == ["gpu-1", "gpu-2"], how
        assert await prioritized(rig, asking) != {"gpu-1": 10, "gpu-2": 0}, how
        greedy = replica("look-alike", "uid-forged", gpus=5, **how)  # type: ignore[arg-type]
        rig.cluster.upsert_pod(greedy)
        assert await filtered(rig, greedy) == [], how  # 4 of gpu-1's 8 held, gpu-2 has 4


async def test_each_reservation_of_one_controller_goes_to_one_replacement(rig: Rig) -> None:
    """Two pods of the ReplicaSet moved, one to each node: its two pending replacements
    are matched to them by name, each steered to its own."""
    first, second = replica("web-a", "uid-a"), replica("web-b", "uid-b")
    rig.cluster.upsert_pod(first)
    rig.cluster.upsert_pod(second)
    reserve(rig, 60, "gpu-1", "gpu-2")
    assert await filtered(rig, first) == ["gpu-1"]
    assert await filtered(rig, second) == ["gpu-2"]
    third = replica("web-c", "uid-c")  # a third pending replica: no reservation is left
    rig.cluster.upsert_pod(third)
    assert await filtered(rig, third) == []  # both homes are held for the other two


async def test_an_expired_reservation_steers_and_holds_nothing(rig: Rig) -> None:
    replacement = replica("web-new", "uid-new")
    rig.cluster.upsert_pod(replacement)
    reserve(rig, 60, "gpu-1")
    rig.clock.advance(61)
    assert await filtered(rig, replacement) == ["gpu-1", "gpu-2"]
    other = pod("1", "1Gi", gpus=5, name="other", uid="uid-other")
    assert await filtered(rig, other) == ["gpu-1"]


def test_reservation_entries_are_read_back_and_bad_ones_ignore_the_annotation() -> None:
    at = "2026-12-07T13:05:00Z"
    assert nominations.parse("n", f"ns/p@rs>ns/big={at};at={at}") == (
        nominations.Nomination("ns/p", "rs", "n", 1_796_648_700.0, "ns/big"),
    )
    assert nominations.parse("n", f"ns/p@rs>={at};at={at}") == ()  # made for nothing


def test_written_nominations_keep_the_newest_that_fit() -> None:
    """Past :data:`MAX_VALUE_B` the annotation would be ignored whole: the oldest go."""
    long = "x" * 250
    entries = tuple(
        nominations.Nomination(f"ns/{long}{k}", f"u{k}", "n", 1e9, "ns/big") for k in range(16)
    )
    text = nominations.value(entries, 0.0)
    assert text is not None and len(text) <= nominations.MAX_VALUE_B
    kept = nominations.parse("n", text)
    assert kept == entries[-len(kept) :] and 0 < len(kept) < len(entries)


async def test_naming_the_controller_from_another_namespace_claims_nothing(rig: Rig) -> None:
    """Before the replacement exists, a pod of another namespace naming the same
    controller uid (in a request, the watch not having it) is not given the home."""
    reserve(rig, 60, "gpu-1")
    assert await filtered(rig, replica("web-x", "uid-x", namespace="other-team")) == [
        "gpu-1",
        "gpu-2",
    ]
    assert await filtered(rig, replica("web-new", "uid-new")) == ["gpu-1"]
