"""Nodes through the real client: list/get/create/delete, the three patch types, PUT and
/status with resourceVersion preconditions, and the metadata limits the apiserver enforces."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from hack.kubeapi.resources import NODES
from tests.kubeapi.kubeapi_support import status_of

MERGE = "application/merge-patch+json"


def test_list_returns_seeded_nodes_with_string_resource_versions(kube, core):
    kube.add_node("worker-2")
    kube.add_node("worker-1", capacity={"cpu": "32"})
    listed = core.list_node()
    assert [n.metadata.name for n in listed.items] == ["worker-1", "worker-2"]
    assert listed.metadata.resource_version == str(kube.store.rv)
    rvs = [int(n.metadata.resource_version) for n in listed.items]
    assert rvs[0] > rvs[1]  # worker-1 was written second
    node = listed.items[0]
    assert node.status.capacity["cpu"] == "32"
    assert node.status.allocatable["cpu"] == "32"
    assert node.metadata.uid and node.metadata.creation_timestamp is not None


def test_list_items_carry_no_type_meta_but_get_does(kube, api_client):
    kube.add_node("worker-1")
    items = api_client.call_api(*api_client.param_serialize("GET", "/api/v1/nodes")).read()
    body = json.loads(items)
    assert body["kind"] == "NodeList" and body["apiVersion"] == "v1"
    assert "kind" not in body["items"][0]
    one = api_client.call_api(*api_client.param_serialize("GET", "/api/v1/nodes/worker-1")).read()
    assert json.loads(one)["kind"] == "Node"


def test_selectors_filter_the_list(kube, core):
    kube.add_node("gpu-1", labels={"accelerator": "h100"})
    kube.add_node("cpu-1")
    assert [n.metadata.name for n in core.list_node(label_selector="accelerator").items] == [
        "gpu-1"
    ]
    assert [n.metadata.name for n in core.list_node(label_selector="!accelerator").items] == [
        "cpu-1"
    ]
    by_set = core.list_node(label_selector="accelerator in (a100,h100)").items
    assert [n.metadata.name for n in by_set] == ["gpu-1"]
    assert [
        n.metadata.name for n in core.list_node(field_selector="metadata.name=cpu-1").items
    ] == ["cpu-1"]
    assert core.list_node(field_selector="metadata.name!=cpu-1").items[0].metadata.name == "gpu-1"


def test_an_unsupported_field_selector_is_a_400(kube, core):
    with pytest.raises(ApiException) as caught:
        core.list_node(field_selector="spec.podCIDR=10.0.0.0/24")
    assert caught.value.status == 400
    assert status_of(caught.value)["message"] == "field label not supported: spec.podCIDR"


def test_pagination_walks_the_list_in_pages(kube, core):
    for i in range(5):
        kube.add_node(f"worker-{i}")
    page = core.list_node(limit=2)
    names = [n.metadata.name for n in page.items]
    assert page.metadata.remaining_item_count == 3
    while page.metadata._continue:
        page = core.list_node(limit=2, _continue=page.metadata._continue)
        names += [n.metadata.name for n in page.items]
    assert names == [f"worker-{i}" for i in range(5)]


def test_merge_patch_null_deletes_an_annotation(kube, core):
    kube.add_node("worker-1", annotations={"stowage.io/report": "v1", "keep": "me"})
    before = core.read_node("worker-1").metadata.resource_version
    patched = core.patch_node(
        "worker-1",
        {"metadata": {"annotations": {"stowage.io/report": None, "stowage.io/new": "x"}}},
        _content_type=MERGE,
    )
    assert patched.metadata.annotations == {"keep": "me", "stowage.io/new": "x"}
    assert int(patched.metadata.resource_version) > int(before)
    assert (
        kube.store.get(NODES, "", "worker-1")["metadata"]["annotations"]
        == patched.metadata.annotations
    )


def test_strategic_merge_patch_behaves_like_merge_patch_for_maps(kube, core):
    """The client's default for dict bodies is strategic merge patch."""
    kube.add_node("worker-1", labels={"zone": "a"}, annotations={"a": "1", "b": "2"})
    patched = core.patch_node(
        "worker-1", {"metadata": {"annotations": {"a": None}, "labels": {"pool": "x"}}}
    )
    assert patched.metadata.annotations == {"b": "2"}
    assert patched.metadata.labels["zone"] == "a" and patched.metadata.labels["pool"] == "x"


def test_merge_patch_with_stale_resource_version_is_a_conflict(kube, core):
    kube.add_node("worker-1")
    seen = core.read_node("worker-1").metadata.resource_version
    core.patch_node("worker-1", {"metadata": {"labels": {"x": "1"}}}, _content_type=MERGE)
    with pytest.raises(ApiException) as caught:
        body = {"metadata": {"resourceVersion": seen, "annotations": {"a": "b"}}}
        core.patch_node("worker-1", body, _content_type=MERGE)
    assert caught.value.status == 409
    assert status_of(caught.value)["reason"] == "Conflict"
    current = core.read_node("worker-1").metadata.resource_version
    body = {"metadata": {"resourceVersion": current, "annotations": {"a": "b"}}}
    assert core.patch_node("worker-1", body, _content_type=MERGE).metadata.annotations["a"] == "b"


def test_json_patch_escapes_slashes_in_keys(kube, core):
    kube.add_node("worker-1", annotations={"stowage.io/old": "1", "stowage.io/report": "v1"})
    ops = [
        {"op": "replace", "path": "/metadata/annotations/stowage.io~1report", "value": "v2"},
        {"op": "remove", "path": "/metadata/annotations/stowage.io~1old"},
        {"op": "add", "path": "/metadata/labels/tier", "value": "gold"},
    ]
    patched = core.patch_node("worker-1", ops)
    assert patched.metadata.annotations == {"stowage.io/report": "v2"}
    assert patched.metadata.labels["tier"] == "gold"


def test_a_failed_json_patch_test_op_changes_nothing(kube, core):
    kube.add_node("worker-1", annotations={"a": "1"})
    ops = [
        {"op": "replace", "path": "/metadata/annotations/a", "value": "2"},
        {"op": "test", "path": "/metadata/annotations/a", "value": "1"},
    ]
    with pytest.raises(ApiException) as caught:
        core.patch_node("worker-1", ops)
    assert caught.value.status == 422
    assert core.read_node("worker-1").metadata.annotations == {"a": "1"}


def test_a_no_op_patch_keeps_the_resource_version(kube, core):
    kube.add_node("worker-1", annotations={"a": "1"})
    before = core.read_node("worker-1").metadata.resource_version
    after = core.patch_node(
        "worker-1", {"metadata": {"annotations": {"a": "1"}}}, _content_type=MERGE
    )
    assert after.metadata.resource_version == before
    assert kube.store.rv == int(before)


def test_put_with_a_stale_resource_version_is_a_conflict(kube, core):
    kube.add_node("worker-1")
    node = core.read_node("worker-1")
    core.patch_node("worker-1", {"metadata": {"labels": {"x": "1"}}})
    node.metadata.labels["y"] = "2"
    with pytest.raises(ApiException) as caught:
        core.replace_node("worker-1", node)
    assert caught.value.status == 409
    fresh = core.read_node("worker-1")
    fresh.metadata.labels["y"] = "2"
    replaced = core.replace_node("worker-1", fresh)
    assert replaced.metadata.labels["y"] == "2" and replaced.metadata.labels["x"] == "1"


def test_status_is_written_only_through_the_status_subresource(kube, core):
    kube.add_node("worker-1", capacity={"cpu": "8"})
    body = {"metadata": {"labels": {"via": "main"}}, "status": {"capacity": {"cpu": "99"}}}
    through_main = core.patch_node("worker-1", body)
    assert through_main.status.capacity["cpu"] == "8"
    assert through_main.metadata.labels["via"] == "main"
    body = {"metadata": {"labels": {"via": "status"}}, "status": {"capacity": {"cpu": "99"}}}
    through_status = core.patch_node_status("worker-1", body)
    assert through_status.status.capacity["cpu"] == "99"
    assert through_status.metadata.labels["via"] == "main"


def test_create_get_delete_and_their_errors(kube, core):
    created = core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="worker-9")))
    assert created.metadata.uid and created.metadata.resource_version == str(kube.store.rv)
    with pytest.raises(ApiException) as caught:
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="worker-9")))
    assert caught.value.status == 409 and status_of(caught.value)["reason"] == "AlreadyExists"
    deleted = core.delete_node("worker-9")
    assert deleted == {  # the client hands this Status over as a dict
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "worker-9", "kind": "nodes", "uid": created.metadata.uid},
    }
    with pytest.raises(ApiException) as caught:
        core.read_node("worker-9")
    assert caught.value.status == 404
    assert status_of(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes "worker-9" not found',
        "reason": "NotFound",
        "details": {"name": "worker-9", "kind": "nodes"},
        "code": 404,
    }


def test_annotations_over_256_kib_are_invalid(kube, core):
    kube.add_node("worker-1")
    big = "x" * (256 * 1024)
    with pytest.raises(ApiException) as caught:
        core.patch_node("worker-1", {"metadata": {"annotations": {"stowage.io/report": big}}})
    assert caught.value.status == 422
    cause = status_of(caught.value)["details"]["causes"][0]
    assert cause["field"] == "metadata.annotations" and cause["reason"] == "FieldValueTooLong"
    fits = "x" * (256 * 1024 - len("stowage.io/report"))
    core.patch_node("worker-1", {"metadata": {"annotations": {"stowage.io/report": fits}}})


def test_invalid_annotation_keys_are_refused(kube, core):
    kube.add_node("worker-1")
    with pytest.raises(ApiException) as caught:
        core.patch_node("worker-1", {"metadata": {"annotations": {"bad key/": "v"}}})
    assert caught.value.status == 422
