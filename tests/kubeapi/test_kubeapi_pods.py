"""Pods, events, PodDisruptionBudgets and namespaces through the real client: what the
apiserver does to a created pod, the selectors node agents use, deletion, and the other
types' basic verbs."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from tests.kubeapi.kubeapi_support import status_of


def test_a_created_pod_starts_pending_with_defaults(kube, core):
    container = client.V1Container(
        name="main",
        image="busybox",
        resources=client.V1ResourceRequirements(limits={"cpu": "1", "memory": "1Gi"}),
    )
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"),
        spec=client.V1PodSpec(containers=[container], node_name="worker-1"),
        status=client.V1PodStatus(phase="Running"),
    )
    created = core.create_namespaced_pod("default", pod)
    assert created.status.phase == "Pending"  # status is not the client's to set
    assert created.status.qos_class == "Guaranteed"
    assert created.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert (
        created.spec.restart_policy == "Always"
        and created.spec.scheduler_name == "default-scheduler"
    )
    running = core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    assert running.status.phase == "Running" and running.status.qos_class == "Guaranteed"


def test_generate_name_and_missing_names(kube, core):
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(generate_name="job-"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")]),
    )
    created = core.create_namespaced_pod("default", pod)
    assert (
        created.metadata.name.startswith("job-") and len(created.metadata.name) == len("job-") + 5
    )
    pod.metadata = client.V1ObjectMeta()
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", pod)
    assert caught.value.status == 422


def test_field_selectors_node_agents_use(kube, core):
    kube.add_pod("a", node="worker-1")
    kube.add_pod("b", node="worker-1", phase="Succeeded")
    kube.add_pod("c", node="worker-2")
    kube.add_pod("d", "other", node="worker-1", phase="Failed")
    on_node = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=worker-1")
    assert [p.metadata.name for p in on_node.items] == ["a", "b", "d"]
    live = core.list_pod_for_all_namespaces(
        field_selector="spec.nodeName=worker-1,status.phase!=Succeeded,status.phase!=Failed"
    )
    assert [p.metadata.name for p in live.items] == ["a"]
    assert [p.metadata.name for p in core.list_namespaced_pod("other").items] == ["d"]


def test_deleting_a_pod_with_a_stale_uid_precondition_conflicts(kube, core):
    kube.add_pod("a", node="worker-1")
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_pod(
            "a",
            "default",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="x")),
        )
    assert caught.value.status == 409
    deleted = core.delete_namespaced_pod("a", "default")
    assert deleted.metadata.deletion_timestamp is not None
    assert core.list_namespaced_pod("default").items == []


def test_events_are_stored_and_listed(kube, core):
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="worker-1.throttled"),
        involved_object=client.V1ObjectReference(kind="Node", name="worker-1"),
        reason="Throttled",
        message="best-effort quota applied",
        type="Normal",
    )
    core.create_namespaced_event("default", event)
    listed = core.list_namespaced_event("default", field_selector="reason=Throttled")
    assert [(e.reason, e.involved_object.name) for e in listed.items] == [("Throttled", "worker-1")]
    assert core.list_event_for_all_namespaces(field_selector="reason=Other").items == []


@pytest.mark.parametrize(
    ("namespace", "involved"), [("stowage-system", None), ("default", "ml")], ids=["node", "pod"]
)
def test_an_event_outside_its_objects_namespace_is_invalid(kube, core, namespace, involved):
    """As the API server has it (seen refused by kube-apiserver 1.37): a Node's Event only
    in default, a pod's only in the pod's namespace."""
    kube.add_namespace(namespace)
    kind = "Node" if involved is None else "Pod"
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="x.1"),
        involved_object=client.V1ObjectReference(kind=kind, name="x", namespace=involved),
        reason="Throttled",
        message="m",
        type="Normal",
    )
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_event(namespace, event)
    assert refused.value.status == 422
    assert "does not match event.namespace" in status_of(refused.value)["message"]


def test_pod_disruption_budgets_list_and_read(kube, api_client):
    kube.add_pdb(
        "web-pdb",
        "default",
        {"app": "web"},
        disruptions_allowed=2,
        current_healthy=3,
        desired_healthy=1,
    )
    policy = client.PolicyV1Api(api_client)
    listed = policy.list_pod_disruption_budget_for_all_namespaces()
    assert [(p.metadata.name, p.status.disruptions_allowed) for p in listed.items] == [
        ("web-pdb", 2)
    ]
    read = policy.read_namespaced_pod_disruption_budget("web-pdb", "default")
    assert read.spec.selector.match_labels == {"app": "web"} and read.metadata.generation == 1


def test_namespaces_and_their_deletion(kube, core):
    names = [n.metadata.name for n in core.list_namespace().items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="batch")))
    kube.add_pod("a", "batch")
    core.delete_namespace("batch")
    assert core.list_pod_for_all_namespaces().items == []
    with pytest.raises(ApiException) as caught:
        core.read_namespace("batch")
    assert status_of(caught.value)["reason"] == "NotFound"


def test_unknown_paths_and_methods(kube, api_client):
    pool = api_client.rest_client.pool_manager
    for method, path, code in [
        ("GET", "/api/v1/widgets", 404),
        ("GET", "/api/v1/pods/a", 404),  # a namespaced type needs its namespace
        ("GET", "/api/v1/namespaces/default/pods/a/logs", 404),
        ("DELETE", "/api/v1/nodes", 405),
        ("GET", "/apis/authentication.k8s.io/v1/tokenreviews", 405),
    ]:
        response = pool.request(method, kube.url + path)
        assert (response.status, response.json()["kind"]) == (code, "Status"), path
