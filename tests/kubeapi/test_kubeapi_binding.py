"""``pods/binding`` and ``bindings`` through the real client, as a scheduler binds: the
Success Status, the pod's node and PodScheduled condition, one MODIFIED for watchers, the
409/404/400 answers, and the emulated kubelet starting a bound pod on an existing node."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, watch
from kubernetes.client import ApiException

from hack.kubeapi import KubeApi
from hack.kubeapi.resources import PODS
from tests.kubeapi.kubeapi_support import binding, status_of


def mark_deleted(pod):
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # as a finalizer holds it
    return pod


def pending_pod(kube, name: str = "p", namespace: str = "default"):
    return kube.add_pod(name, namespace, phase="Pending", requests={"cpu": "1"})


def test_binding_answers_201_with_a_success_status(kube, core):
    kube.add_node("worker-1")
    pending_pod(kube)
    answer = core.create_namespaced_pod_binding(
        "p", "default", binding("p", "worker-1"), _preload_content=False
    )
    assert answer.status == 201
    assert json.loads(answer.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    pod = core.read_namespaced_pod("p", "default")
    assert pod.spec.node_name == "worker-1"
    scheduled = [c for c in pod.status.conditions if c.type == "PodScheduled"]
    assert [(c.status, c.last_transition_time is not None) for c in scheduled] == [("True", True)]


def test_the_clients_default_deserialisation_of_the_status_fails_after_binding(kube, core):
    """The client reads the Status answer as a V1Binding, whose ``target`` is required, so
    by default it raises (a pydantic ValidationError, a ValueError) although the pod was
    bound, as against a real apiserver: callers pass ``_preload_content=False``."""
    kube.add_node("worker-1")
    pending_pod(kube)
    with pytest.raises(ValueError, match="target"):
        core.create_namespaced_binding("default", binding("p", "worker-1"))
    assert core.read_namespaced_pod("p", "default").spec.node_name == "worker-1"


def test_the_bindings_collection_binds_the_pod_its_body_names(kube, core):
    kube.add_node("worker-2")
    pending_pod(kube, "q", "batch")
    answer = core.create_namespaced_binding(
        "batch", binding("q", "worker-2", annotations={"stowage.io/why": "fits"}),
        _preload_content=False,
    )  # fmt: skip
    assert answer.status == 201
    pod = core.read_namespaced_pod("q", "batch")
    assert pod.spec.node_name == "worker-2"
    assert pod.metadata.annotations == {"stowage.io/why": "fits"}


def test_binding_a_bound_pod_is_a_conflict(kube, core):
    kube.add_node("worker-1")
    pending_pod(kube)
    core.create_namespaced_pod_binding(
        "p", "default", binding("p", "worker-1"), _preload_content=False
    )
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_binding(
            "p", "default", binding("p", "worker-2"), _preload_content=False
        )
    assert caught.value.status == 409
    assert status_of(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Operation cannot be fulfilled on pods/binding "p": '
        'pod p is already assigned to node "worker-1"',
        "reason": "Conflict",
        "details": {"name": "p", "kind": "pods/binding"},
        "code": 409,
    }
    assert core.read_namespaced_pod("p", "default").spec.node_name == "worker-1"


def test_a_terminating_or_gated_pod_is_not_bound(kube, core):
    kube.add_pod("leaving", phase="Pending")
    kube.store.update(PODS, "default", "leaving", mark_deleted)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_binding(
            "leaving", "default", binding("leaving", "worker-1"), _preload_content=False
        )
    assert caught.value.status == 409
    assert status_of(caught.value)["message"].endswith(
        "pod leaving is being deleted, cannot be assigned to a host"
    )
    pending_pod(kube, "gated")
    core.patch_namespaced_pod("gated", "default", {"spec": {"schedulingGates": [{"name": "wait"}]}})
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_binding(
            "gated", "default", binding("gated", "worker-1"), _preload_content=False
        )
    assert caught.value.status == 409
    assert "has non-empty .spec.schedulingGates" in status_of(caught.value)["message"]


def test_unknown_pods_stale_preconditions_and_bad_bodies(kube, core, api_client):
    pod = pending_pod(kube)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_binding(
            "nope", "default", binding("nope", "worker-1"), _preload_content=False
        )
    assert (caught.value.status, status_of(caught.value)["message"]) == (
        404,
        'pods "nope" not found',
    )
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_binding(
            "p", "default", binding("p", "worker-1", uid="other"), _preload_content=False
        )
    assert caught.value.status == 409
    assert f"UID in object meta: {pod['metadata']['uid']}" in status_of(caught.value)["message"]
    pool = api_client.rest_client.pool_manager
    url = kube.url + "/api/v1/namespaces/default/pods/p/binding"
    for body, code, message in [
        (
            {"metadata": {"name": "other"}, "target": {"name": "worker-1"}},
            400,
            "name in URL does not match name in Binding object",
        ),
        (
            {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}},
            400,
            'Pod in version "v1" cannot be handled as a Binding',
        ),
        (
            {"metadata": {"name": "p", "namespace": "batch"}, "target": {"name": "worker-1"}},
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        ),
        (
            {"metadata": {"name": "p"}, "target": {"kind": "Pod", "name": "x"}},
            500,
            'target.kind: Unsupported value: "Pod": supported values: "Node", "<empty>"',
        ),
        ({"metadata": {"name": "p"}, "target": {}}, 500, "target.name: Required value"),
    ]:
        answer = pool.request("POST", url, body=json.dumps(body))
        assert (answer.status, answer.json()["message"]) == (code, message), body
        reason = answer.json().get("reason")  # StatusReasonUnknown is "", left out
        assert reason == ("BadRequest" if code == 400 else None), body
    assert core.read_namespaced_pod("p", "default").spec.node_name is None


def test_dry_run_binds_nothing(kube, core):
    kube.add_node("worker-1")
    pending_pod(kube)
    answer = core.create_namespaced_pod_binding(
        "p", "default", binding("p", "worker-1"), dry_run="All", _preload_content=False
    )
    assert answer.status == 201
    assert core.read_namespaced_pod("p", "default").spec.node_name is None


def test_a_watcher_sees_the_binding_then_the_kubelet_start(kube, core):
    kube.add_node("worker-1", address="10.0.0.7")
    pending_pod(kube)
    rv = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod_binding(
        "p", "default", binding("p", "worker-1"), _preload_content=False
    )
    w = watch.Watch()
    events = []
    for event in w.stream(core.list_namespaced_pod, "default", resource_version=rv):
        events.append(event)
        if len(events) == 2:
            w.stop()
    bound, running = (e["object"] for e in events)
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED"]
    assert (bound.spec.node_name, bound.status.phase) == ("worker-1", "Pending")
    assert running.status.phase == "Running"
    ready = {c.type: c.status for c in running.status.conditions}
    assert ready == {
        "PodScheduled": "True",
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    assert running.status.host_ip == "10.0.0.7"
    assert running.status.pod_ip == "10.244.0.2" and running.status.start_time is not None
    assert [(s.name, s.ready, s.restart_count) for s in running.status.container_statuses] == [
        ("main", True, 0)
    ]


def test_the_kubelet_starts_only_bound_pods_on_nodes_that_exist(kube, core):
    kube.add_node("worker-1")
    for name, node in (("bound", "worker-1"), ("nowhere", "gone")):
        pending_pod(kube, name)
        core.create_namespaced_pod_binding(
            name, "default", binding(name, node), _preload_content=False
        )
    created = client.V1Pod(
        metadata=client.V1ObjectMeta(name="created-on-node"),
        spec=client.V1PodSpec(node_name="worker-1", containers=[client.V1Container(name="c")]),
    )
    core.create_namespaced_pod("default", created)
    phases = {p.metadata.name: p.status.phase for p in core.list_namespaced_pod("default").items}
    assert phases == {"bound": "Running", "created-on-node": "Pending", "nowhere": "Pending"}


def test_binding_to_a_node_created_without_spec_starts_the_pod(kube, core):
    """A Node object may be created with no ``spec`` at all; binding to it is no 500."""
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="bare")))
    pending_pod(kube)
    core.create_namespaced_pod_binding("p", "default", binding("p", "bare"), _preload_content=False)
    pod = core.read_namespaced_pod("p", "default")
    assert (pod.spec.node_name, pod.status.phase) == ("bare", "Running")
    assert pod.status.pod_ip == "10.244.0.2"


def test_pod_ips_are_distinct_within_the_pod_cidr(kube, core):
    kube.add_node("worker-1")
    for i in range(3):
        pending_pod(kube, f"p{i}")
        core.create_namespaced_pod_binding(
            f"p{i}", "default", binding(f"p{i}", "worker-1"), _preload_content=False
        )
    ips = [p.status.pod_ip for p in core.list_namespaced_pod("default").items]
    assert ips == ["10.244.0.2", "10.244.0.3", "10.244.0.4"]


def test_without_the_kubelet_a_bound_pod_stays_pending():
    with KubeApi.in_thread(kubelet=False) as api:
        api.add_node("worker-1")
        pending_pod(api)
        with client.ApiClient(client.Configuration(host=api.url)) as c:
            core = client.CoreV1Api(c)
            core.create_namespaced_pod_binding(
                "p", "default", binding("p", "worker-1"), _preload_content=False
            )
            pod = core.read_namespaced_pod("p", "default")
    assert (pod.spec.node_name, pod.status.phase) == ("worker-1", "Pending")


def test_discovery_lists_the_binding_subresource_and_collection(kube, api_client):
    resources = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources().resources}
    assert (resources["pods/binding"].kind, resources["pods/binding"].verbs) == (
        "Binding",
        ["create"],
    )
    assert resources["pods/binding"].group is None
    assert (resources["bindings"].namespaced, resources["bindings"].verbs) == (True, ["create"])
    assert resources["pods/eviction"].group == "policy"
