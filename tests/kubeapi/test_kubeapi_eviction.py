"""``pods/eviction`` through ``CoreV1Api.create_namespaced_pod_eviction``: 201 and the pod
goes; PodDisruptionBudgets give 429 (with the cause the apiserver writes), 500 for two
budgets; dry run changes nothing; terminal and unready pods skip the budget."""

from __future__ import annotations

import pytest
from kubernetes import client, watch
from kubernetes.client import ApiException

from tests.kubeapi.kubeapi_support import status_of


def eviction(name: str, namespace: str = "default", **delete_options) -> client.V1Eviction:
    options = client.V1DeleteOptions(**delete_options) if delete_options else None
    return client.V1Eviction(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace), delete_options=options
    )


def evict(core, name: str, namespace: str = "default", **kwargs):
    """(HTTP status, body) of an eviction, raising ApiException for errors."""
    body = kwargs.pop("body", None) or eviction(name, namespace)
    _, code, _ = core.create_namespaced_pod_eviction_with_http_info(name, namespace, body, **kwargs)
    return code


def gone(core, name: str, namespace: str = "default") -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as e:
        return e.status == 404
    return False


def test_without_a_budget_the_pod_is_evicted(kube, core):
    kube.add_pod("web-1", node="worker-1", labels={"app": "web"})
    rv = str(kube.store.rv)
    assert evict(core, "web-1") == 201
    assert gone(core, "web-1")
    w = watch.Watch()
    events = []
    for e in w.stream(core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=30):
        events.append(e)
        if len(events) == 3:
            w.stop()
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED", "DELETED"]
    conditions = {c.type: c.reason for c in events[0]["object"].status.conditions}
    assert conditions["DisruptionTarget"] == "EvictionByEvictionAPI"
    assert events[1]["object"].metadata.deletion_timestamp is not None


def test_a_budget_allows_one_eviction_then_answers_429(kube, core):
    for i in range(3):
        kube.add_pod(f"web-{i}", node="worker-1", labels={"app": "web"})
    kube.add_pdb("web-pdb", "default", {"app": "web"}, disruptions_allowed=1)
    assert evict(core, "web-0") == 201
    pdb = client.PolicyV1Api(core.api_client).read_namespaced_pod_disruption_budget(
        "web-pdb", "default"
    )
    assert pdb.status.disruptions_allowed == 0
    assert list(pdb.status.disrupted_pods) == ["web-0"]

    with pytest.raises(ApiException) as caught:
        evict(core, "web-1")
    assert caught.value.status == 429
    assert status_of(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web-pdb needs 2 healthy pods "
                    "and has 3 currently",
                }
            ]
        },
        "code": 429,
    }
    assert not gone(core, "web-1")


def test_two_budgets_for_one_pod_are_a_500(kube, core):
    kube.add_pod("web-1", node="worker-1", labels={"app": "web", "tier": "front"})
    kube.add_pdb("by-app", "default", {"app": "web"}, disruptions_allowed=5)
    kube.add_pdb("by-tier", "default", {"tier": "front"}, disruptions_allowed=5)
    with pytest.raises(ApiException) as caught:
        evict(core, "web-1")
    assert caught.value.status == 500
    assert status_of(caught.value)["message"] == (
        "This pod has more than one PodDisruptionBudget, "
        "which the eviction subresource does not support."
    )
    assert not gone(core, "web-1")


def test_dry_run_changes_nothing(kube, core):
    kube.add_pod("web-1", node="worker-1", labels={"app": "web"})
    kube.add_pdb("web-pdb", "default", {"app": "web"}, disruptions_allowed=1)
    rv = kube.store.rv
    assert evict(core, "web-1", dry_run="All") == 201
    assert evict(core, "web-1", body=eviction("web-1", dry_run=["All"])) == 201
    assert kube.store.rv == rv and not gone(core, "web-1")


def test_dry_run_still_reports_a_blocking_budget(kube, core):
    kube.add_pod("web-1", node="worker-1", labels={"app": "web"})
    kube.add_pdb("web-pdb", "default", {"app": "web"}, disruptions_allowed=0)
    with pytest.raises(ApiException) as caught:
        evict(core, "web-1", dry_run="All")
    assert caught.value.status == 429


def test_a_name_mismatch_is_a_400_and_a_missing_pod_a_404(kube, core):
    kube.add_pod("web-1", node="worker-1")
    with pytest.raises(ApiException) as caught:
        evict(core, "web-1", body=eviction("web-2"))
    assert caught.value.status == 400
    assert (
        status_of(caught.value)["message"] == "name in URL does not match name in Eviction object"
    )
    with pytest.raises(ApiException) as caught:
        evict(core, "web-9")
    assert caught.value.status == 404


@pytest.mark.parametrize("phase", ["Pending", "Succeeded", "Failed"])
def test_pods_not_running_skip_the_budget(kube, core, phase):
    kube.add_pod("web-1", node="worker-1", labels={"app": "web"}, phase=phase)
    kube.add_pdb("web-pdb", "default", {"app": "web"}, disruptions_allowed=0)
    assert evict(core, "web-1") == 201
    assert gone(core, "web-1")


def test_an_unready_pod_goes_without_spending_a_healthy_budget(kube, core):
    kube.add_pod("web-1", node="worker-1", labels={"app": "web"}, ready=False)
    kube.add_pdb(
        "web-pdb",
        "default",
        {"app": "web"},
        disruptions_allowed=0,
        current_healthy=2,
        desired_healthy=2,
    )
    assert evict(core, "web-1") == 201
    pdb = client.PolicyV1Api(core.api_client).read_namespaced_pod_disruption_budget(
        "web-pdb", "default"
    )
    assert pdb.status.disruptions_allowed == 0 and not pdb.status.disrupted_pods


def test_a_budget_not_yet_observed_asks_to_retry(kube, core):
    kube.add_pod("web-1", node="worker-1", labels={"app": "web"})
    policy = client.PolicyV1Api(core.api_client)
    pdb = client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="fresh"),
        spec=client.V1PodDisruptionBudgetSpec(
            min_available=1, selector=client.V1LabelSelector(match_labels={"app": "web"})
        ),
    )
    policy.create_namespaced_pod_disruption_budget("default", pdb)
    with pytest.raises(ApiException) as caught:
        evict(core, "web-1")
    assert caught.value.status == 429
    assert caught.value.headers["Retry-After"] == "10"
    details = status_of(caught.value)["details"]
    assert details["retryAfterSeconds"] == 10
    assert (
        details["causes"][0]["message"]
        == "The disruption budget fresh is still being processed by the server."
    )


def test_a_uid_precondition_that_does_not_match_is_a_conflict(kube, core):
    kube.add_pod("web-1", node="worker-1")
    body = eviction("web-1", preconditions=client.V1Preconditions(uid="not-the-uid"))
    with pytest.raises(ApiException) as caught:
        evict(core, "web-1", body=body)
    assert caught.value.status == 409
    assert not gone(core, "web-1")
