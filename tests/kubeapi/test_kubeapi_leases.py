"""Leases as leader election uses them: create, read, PUT with the read resourceVersion,
409 Conflict for the contender that wrote second, merge patches, create-on-PUT."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from tests.kubeapi.kubeapi_support import status_of


@pytest.fixture
def leases(api_client) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api_client)


def lease(name: str, holder: str, namespace: str = "kube-system") -> client.V1Lease:
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        spec=client.V1LeaseSpec(
            holder_identity=holder, lease_duration_seconds=15, lease_transitions=0
        ),
    )


def test_create_and_read_a_lease(kube, leases):
    created = leases.create_namespaced_lease("kube-system", lease("stowage-coordinator", "a"))
    assert created.kind == "Lease" and created.api_version == "coordination.k8s.io/v1"
    read = leases.read_namespaced_lease("stowage-coordinator", "kube-system")
    assert read.spec.holder_identity == "a"
    assert read.metadata.resource_version == created.metadata.resource_version


def test_the_second_writer_from_the_same_read_gets_409(kube, leases):
    leases.create_namespaced_lease("kube-system", lease("stowage-coordinator", "a"))
    seen_by_a = leases.read_namespaced_lease("stowage-coordinator", "kube-system")
    seen_by_b = leases.read_namespaced_lease("stowage-coordinator", "kube-system")
    seen_by_a.spec.renew_time = "2026-11-29T17:14:04.123456Z"
    renewed = leases.replace_namespaced_lease("stowage-coordinator", "kube-system", seen_by_a)
    assert int(renewed.metadata.resource_version) > int(seen_by_a.metadata.resource_version)

    seen_by_b.spec.holder_identity = "b"
    seen_by_b.spec.lease_transitions = 1
    with pytest.raises(ApiException) as caught:
        leases.replace_namespaced_lease("stowage-coordinator", "kube-system", seen_by_b)
    assert caught.value.status == 409
    status = status_of(caught.value)
    assert status["reason"] == "Conflict"
    assert status["details"] == {
        "name": "stowage-coordinator",
        "group": "coordination.k8s.io",
        "kind": "leases",
    }
    assert status["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "stowage-coordinator": '
        "the object has been modified; please apply your changes to the latest version and "
        "try again"
    )
    assert (
        leases.read_namespaced_lease("stowage-coordinator", "kube-system").spec.holder_identity
        == "a"
    )


def test_merge_patch_renews_and_honours_a_resource_version_precondition(kube, leases):
    created = leases.create_namespaced_lease("kube-system", lease("l", "a"))
    body = {"spec": {"renewTime": "2026-11-29T17:14:05.000000Z"}}
    patched = leases.patch_namespaced_lease(
        "l", "kube-system", body, _content_type="application/merge-patch+json"
    )
    assert patched.spec.renew_time is not None and patched.spec.holder_identity == "a"
    stale = {
        "metadata": {"resourceVersion": created.metadata.resource_version},
        "spec": {"holderIdentity": "b"},
    }
    with pytest.raises(ApiException) as caught:
        leases.patch_namespaced_lease(
            "l", "kube-system", stale, _content_type="application/merge-patch+json"
        )
    assert caught.value.status == 409


def test_put_creates_a_missing_lease_and_refuses_a_missing_namespace(kube, leases):
    created = leases.replace_namespaced_lease("new", "kube-system", lease("new", "a"))
    assert created.metadata.uid and created.spec.holder_identity == "a"
    with pytest.raises(ApiException) as caught:
        leases.create_namespaced_lease("nowhere", lease("l", "a", "nowhere"))
    assert caught.value.status == 404
    assert status_of(caught.value)["message"] == 'namespaces "nowhere" not found'


def test_a_put_whose_name_differs_from_the_url_is_a_400(kube, leases):
    leases.create_namespaced_lease("kube-system", lease("l", "a"))
    with pytest.raises(ApiException) as caught:
        leases.replace_namespaced_lease("l", "kube-system", lease("other", "a"))
    assert caught.value.status == 400
