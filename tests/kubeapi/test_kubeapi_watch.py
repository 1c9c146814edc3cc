"""Watches through ``kubernetes.watch.Watch``: ordered events with increasing
resourceVersions, 410 Expired once the history has moved on (and a relist that recovers),
selector transitions, bookmarks, and a live stream over aiohttp that ends on shutdown."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import aiohttp
import pytest
from kubernetes import client, watch
from kubernetes.client import ApiException

from hack.kubeapi import KubeApi

MERGE = "application/merge-patch+json"


def collect(stream, w, count):
    events = []
    for event in stream:
        events.append(event)
        if len(events) == count:
            w.stop()
    return events


def test_watch_from_a_list_replays_changes_in_order(kube, core):
    kube.add_node("worker-1")
    rv = core.list_node().metadata.resource_version
    kube.add_node("worker-2")
    core.patch_node("worker-1", {"metadata": {"annotations": {"a": "1"}}}, _content_type=MERGE)
    core.delete_node("worker-2")
    w = watch.Watch()
    events = collect(w.stream(core.list_node, resource_version=rv, timeout_seconds=30), w, 3)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "worker-2"),
        ("MODIFIED", "worker-1"),
        ("DELETED", "worker-2"),
    ]
    rvs = [int(e["object"].metadata.resource_version) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3 and rvs[0] > int(rv)
    assert events[1]["object"].metadata.annotations == {"a": "1"}
    assert events[2]["raw_object"]["kind"] == "Node"


def test_watch_without_resource_version_starts_with_the_current_objects(kube, core):
    kube.add_node("worker-1")
    w = watch.Watch()
    seen = []
    for event in w.stream(core.list_node, timeout_seconds=30):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 1:
            kube.add_node("worker-2")  # written while the stream is open
        else:
            w.stop()
    assert seen == [("ADDED", "worker-1"), ("ADDED", "worker-2")]


def test_watch_from_an_expired_resource_version_is_410_and_a_relist_recovers():
    with (
        KubeApi.in_thread(history=3) as kube,
        client.ApiClient(client.Configuration(host=kube.url)) as c,
    ):
        core = client.CoreV1Api(c)
        old_rv = core.list_node().metadata.resource_version
        for i in range(5):
            kube.add_node(f"worker-{i}")
        with pytest.raises(ApiException) as caught:
            list(watch.Watch().stream(core.list_node, resource_version=old_rv, timeout_seconds=30))
        assert caught.value.status == 410
        assert "too old resource version" in caught.value.reason
        # Without timeout_seconds the client retries once from the same version, then raises.
        with pytest.raises(ApiException) as caught:
            list(watch.Watch().stream(core.list_node, resource_version=old_rv, _request_timeout=30))
        assert caught.value.status == 410

        listed = core.list_node()
        assert len(listed.items) == 5
        kube.add_node("worker-5")
        w = watch.Watch()
        events = collect(
            w.stream(
                core.list_node,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=30,
            ),
            w,
            1,
        )
        assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "worker-5")]


def test_the_expired_event_is_an_in_band_status(kube, api_client):
    """The apiserver answers 200 and sends the 410 as an ERROR event."""
    with KubeApi.in_thread(history=1) as small:
        small.add_node("a")
        small.add_node("b")
        response = api_client.rest_client.pool_manager.request(
            "GET", f"{small.url}/api/v1/nodes?watch=true&resourceVersion=1&timeoutSeconds=5"
        )
    assert response.status == 200
    lines = response.data.decode().splitlines()
    assert len(lines) == 1
    event = json.loads(lines[0])
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    assert event["object"]["message"].startswith("too old resource version: 1 (")


def test_label_selector_turns_relabels_into_added_and_deleted(kube, core):
    kube.add_node("worker-1", labels={"pool": "gpu"})
    rv = core.list_node().metadata.resource_version
    core.patch_node("worker-1", {"metadata": {"labels": {"pool": "cpu"}}})
    core.patch_node("worker-1", {"metadata": {"labels": {"pool": "gpu", "x": "1"}}})
    core.patch_node("worker-1", {"metadata": {"labels": {"y": "1"}}})
    w = watch.Watch()
    stream = w.stream(
        core.list_node, label_selector="pool=gpu", resource_version=rv, timeout_seconds=30
    )
    events = collect(stream, w, 3)
    assert [e["type"] for e in events] == ["DELETED", "ADDED", "MODIFIED"]
    assert events[0]["object"].metadata.labels["pool"] == "gpu"  # the last state that matched


def test_pod_watch_is_scoped_by_namespace_and_field_selector(kube, core):
    kube.add_namespace("other")
    rv = str(kube.store.rv)
    kube.add_pod("a", "other", node="worker-1")
    kube.add_pod("b", "default", node="worker-2")
    kube.add_pod("c", "default", node="worker-1")
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_pod,
        "default",
        field_selector="spec.nodeName=worker-1",
        resource_version=rv,
        timeout_seconds=30,
    )
    assert [e["object"].metadata.name for e in collect(stream, w, 1)] == ["c"]
    w = watch.Watch()
    stream = w.stream(core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=30)
    assert [e["object"].metadata.name for e in collect(stream, w, 3)] == ["a", "b", "c"]


def test_bookmarks_close_a_timed_out_watch(kube, core):
    kube.add_node("worker-1")
    rv = core.list_node().metadata.resource_version
    kube.add_pod("p", node="worker-1")  # moves the global rv past the nodes' last change
    events = list(
        watch.Watch().stream(
            core.list_node, resource_version=rv, timeout_seconds=1, allow_watch_bookmarks=True
        )
    )
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert events[0]["raw_object"]["metadata"]["resourceVersion"] == str(kube.store.rv)
    assert events[0]["raw_object"]["kind"] == "Node"


def test_watch_list_sends_initial_events_then_a_marked_bookmark(kube, core):
    kube.add_node("worker-1")
    kube.add_node("worker-2")
    w = watch.Watch()
    stream = w.stream(
        core.list_node,
        resource_version="1",
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=30,
    )
    events = collect(stream, w, 3)
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    marker = events[2]["raw_object"]["metadata"]
    assert marker["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert marker["resourceVersion"] == str(kube.store.rv)


async def test_a_live_stream_over_aiohttp_sees_writes_and_ends_on_shutdown():
    async with KubeApi.running() as kube, aiohttp.ClientSession() as session:
        kube.add_node("worker-1")
        url = f"{kube.url}/api/v1/nodes?watch=1"
        async with session.get(url) as response:
            assert response.status == 200
            first = json.loads(await response.content.readline())
            assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "worker-1")
            patch = {"metadata": {"annotations": {"stowage.io/report": "v1"}}}
            async with session.patch(
                f"{kube.url}/api/v1/nodes/worker-1", json=patch, headers={"Content-Type": MERGE}
            ) as patched:
                assert patched.status == 200
            second = json.loads(await response.content.readline())
            assert second["type"] == "MODIFIED"
            assert second["object"]["metadata"]["annotations"] == {"stowage.io/report": "v1"}
            await kube.stop()
            assert await response.content.read() == b""


@pytest.mark.parametrize("timeout", ["abc", "1.5", "9" * 5000])
def test_a_timeout_that_is_not_a_whole_number_is_a_400(kube, timeout):
    # The Python client checks the type itself: asked by hand, as any other client may.
    url = f"{kube.url}/api/v1/nodes?watch=1&timeoutSeconds={timeout}"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=10)  # noqa: S310 - the emulator on 127.0.0.1
    assert refused.value.code == 400
    assert json.load(refused.value)["message"].startswith("timeoutSeconds: Invalid value")
