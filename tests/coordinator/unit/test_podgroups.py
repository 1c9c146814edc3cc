"""The PodGroups' queues as their watch delivers them: where a pod's queue comes from."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from coordinator.state.podgroups import PodGroups
from tests.coordinator.eviction.evictrig import EvictRig, pod, podgroup

GANG = "scheduling.k8s.io/group-name"


def member(group: str | None, namespace: str = "ns", **notes: str) -> Any:
    if group is not None:
        notes[GANG] = group
    return EvictRig().facts(pod("p", namespace=namespace, annotations=notes))


def test_a_pod_s_queue_is_its_podgroup_s_else_its_namespace() -> None:
    groups = PodGroups()
    groups.replace([podgroup("job", "research"), podgroup("plain", None)])
    queues = groups.queues()
    assert queues.of(member("job", **{"scheduling.volcano.sh/queue-name": "x"})) == "research"
    assert queues.of(member("plain")) == "default"
    assert queues.of(member(None, **{"scheduling.volcano.sh/queue-name": "x"})) == "ns"
    assert queues.of(member("job", namespace="other")) is None  # its own namespace's only
    assert queues.of(member("missing")) is None


def test_changes_and_deletions_follow_the_watch_and_a_view_keeps_its_copy() -> None:
    groups = PodGroups()
    groups.upsert(podgroup("job", "research"))
    before = groups.queues()
    groups.upsert(podgroup("job", "batch"))
    assert groups.queues().of(member("job")) == "batch"
    assert before.of(member("job")) == "research"
    groups.remove(podgroup("job", "batch"))
    assert groups.queues().of(member("job")) is None
    groups.upsert(podgroup("job", "research"))
    groups.replace([])  # a relist without it, or a 404: PodGroups not served
    assert groups.queues().of(member("job")) is None


@pytest.mark.parametrize("queue", [7, ["research"], {"name": "research"}])
def test_a_queue_that_is_not_a_name_makes_the_queue_unknown(
    queue: Any, caplog: pytest.LogCaptureFixture
) -> None:
    groups = PodGroups()
    groups.upsert(podgroup("job", "research"))
    bad = podgroup("job", "research")
    bad["spec"]["queue"] = queue
    with caplog.at_level(logging.WARNING):
        groups.upsert(bad)
    assert groups.queues().of(member("job")) is None
    assert "podgroup ns/job: spec.queue" in caplog.text


def test_podgroups_without_a_name_or_namespace_are_skipped() -> None:
    groups = PodGroups()
    nameless = podgroup("x", "research")
    del nameless["metadata"]["name"]
    nowhere = podgroup("x", "research")
    nowhere["metadata"]["namespace"] = ""
    groups.replace([nameless, nowhere, {"metadata": None}])
    assert groups.queues().by_group == {}


def test_the_candidates_are_the_namespace_and_its_podgroups_queues() -> None:
    groups = PodGroups()
    groups.replace(
        [
            podgroup("a", "light"),
            podgroup("b", "heavy"),
            podgroup("c", "light"),
            podgroup("d", "theirs", namespace="ns2"),  # "ns2/" does not start with "ns/"
        ]
    )
    assert groups.queues().candidates("ns") == ["heavy", "light", "ns"]
    assert groups.queues().candidates("empty") == ["empty"]


def test_min_member_is_a_podgroups_count_and_nothing_else() -> None:
    """``spec.minMember`` sizes the gang for gang locality: an int32 count of at least 1;
    anything else is not known (the pods' own count is used), and never a crash."""
    groups = PodGroups()
    sized = podgroup("job", "research")
    for value, known in [(8, 8), (2**31 - 1, 2**31 - 1), (0, None), (2**31, None),
                         (True, None), ("8", None), (None, None)]:  # fmt: skip
        sized["spec"]["minMember"] = value
        groups.upsert(sized)
        assert groups.min_member("ns/job") == known, value
    sized["spec"]["minMember"] = 4
    groups.upsert(sized)
    groups.remove(sized)
    assert groups.min_member("ns/job") is None
    groups.upsert(sized)
    groups.replace([])
    assert groups.min_member("ns/job") is None
