"""Protobuf bodies from kubectl's typed clients: ``kubectl create namespace`` and ``kubectl
create poddisruptionbudget`` work, the bytes kubectl sends decode to the objects they
stand for, and what is not decoded is 415 rather than silently lost."""

from __future__ import annotations

import pytest
from kubernetes import client

from hack.kubeapi import errors, protobuf
from tests.kubeapi.kubeapi_support import needs_kubectl

# kubectl v1.32's request bodies (from -v=9) for `create namespace batch` and
# `create pdb web --selector=app=web,tier=x --min-available=50%`.
NAMESPACE = bytes.fromhex(
    """
    6b 38 73 00 0a 0f 0a 02 76 31 12 09 4e 61 6d 65
    73 70 61 63 65 12 1d 0a 15 0a 05 62 61 74 63 68
    12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 12 00
    1a 02 0a 00 1a 00 22 00
    """
)
PDB = bytes.fromhex(
    """
    6b 38 73 00 0a 20 0a 09 70 6f 6c 69 63 79 2f 76
    31 12 13 50 6f 64 44 69 73 72 75 70 74 69 6f 6e
    42 75 64 67 65 74 12 47 0a 13 0a 03 77 65 62 12
    00 1a 00 22 00 2a 00 32 00 38 00 42 00 12 24 0a
    09 08 01 10 00 1a 03 35 30 25 12 17 0a 0a 0a 03
    61 70 70 12 03 77 65 62 0a 09 0a 04 74 69 65 72
    12 01 78 1a 0a 08 00 18 00 20 00 28 00 30 00 1a
    00 22 00
    """
)


@needs_kubectl
def test_kubectl_creates_a_namespace_and_a_pdb(kube, kubectl, core, api_client):
    assert kubectl("create", "namespace", "batch").strip() == "namespace/batch created"
    ns = core.read_namespace("batch")
    assert (ns.status.phase, ns.spec.finalizers) == ("Active", ["kubernetes"])
    out = kubectl(
        "create", "pdb", "web", "-n", "batch", "--selector=app=web,tier=x", "--min-available=50%"
    )
    assert out.strip() == "poddisruptionbudget.policy/web created"
    pdb = client.PolicyV1Api(api_client).read_namespaced_pod_disruption_budget("web", "batch")
    assert (pdb.spec.min_available, pdb.spec.max_unavailable) == ("50%", None)
    assert pdb.spec.selector.match_labels == {"app": "web", "tier": "x"}
    kubectl("create", "pdb", "db", "--selector=app=db", "--max-unavailable=1")
    read = client.PolicyV1Api(api_client).read_namespaced_pod_disruption_budget("db", "default")
    assert read.spec.max_unavailable == 1


def test_kubectls_bytes_decode_to_the_objects():
    assert protobuf.decode(NAMESPACE) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "batch"},
        "spec": {},
        "status": {},
    }
    assert protobuf.decode(PDB) == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web", "tier": "x"}}},
        "status": {},
    }


def envelope(api_version: bytes, kind: bytes, raw: bytes) -> bytes:
    type_meta = b"\x0a" + bytes([len(api_version)]) + api_version
    type_meta += b"\x12" + bytes([len(kind)]) + kind
    return b"k8s\x00\x0a" + bytes([len(type_meta)]) + type_meta + b"\x12" + bytes([len(raw)]) + raw


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"kind": "Namespace"}', "starts with k8s\\0"),
        (envelope(b"v1", b"Pod", b""), "Pod v1 is decoded from JSON only"),
        (envelope(b"v1", b"Namespace", b"\x0a\x03\x7a\x01x"), "field 15 of ObjectMeta"),
        (envelope(b"v1", b"Namespace", b"\x0a\x05\x0a\x09ab"), "truncated"),
        (envelope(b"v1", b"Namespace", b"\x0d\x00\x00\x00\x00"), "wire type 5"),
    ],
)
def test_what_is_not_decoded_is_415(body, why):
    with pytest.raises(errors.ApiError) as caught:
        protobuf.decode(body)
    assert caught.value.code == 415 and why in caught.value.status["message"]


def test_protobuf_of_another_kind_over_http_is_415(kube, api_client):
    answer = api_client.rest_client.pool_manager.request(
        "POST",
        kube.url + "/api/v1/namespaces/default/pods",
        body=envelope(b"v1", b"Pod", b""),
        headers={"Content-Type": protobuf.MEDIA_TYPE},
    )
    assert (answer.status, answer.json()["reason"]) == (415, "UnsupportedMediaType")
    cbor = api_client.rest_client.pool_manager.request(
        "POST", kube.url + "/api/v1/namespaces", body=b"\xa0",
        headers={"Content-Type": "application/cbor"},
    )  # fmt: skip
    assert cbor.status == 415
