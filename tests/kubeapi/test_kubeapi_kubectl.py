"""``kubectl`` as an independent client: discovery, ``get`` (Table output), jsonpath reads
and ``annotate`` writes that the Python client then sees, and token authentication."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from hack.kubeapi import KubeApi
from tests.kubeapi.kubeapi_support import needs_kubectl

pytestmark = needs_kubectl


def test_get_nodes_prints_a_table(kube, kubectl):
    kube.add_node("worker-1")
    kube.add_node("worker-2")
    lines = kubectl("get", "nodes").splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [line.split()[0] for line in lines[1:]] == ["worker-1", "worker-2"]


def test_annotate_round_trips_through_jsonpath_and_the_python_client(kube, kubectl, core):
    kube.add_node("worker-1", annotations={"stowage.io/old": "x"})
    assert (
        kubectl("annotate", "node", "worker-1", "stowage.io/report=v1").strip()
        == "node/worker-1 annotated"
    )
    read = kubectl("get", "node", "worker-1", "-o", "jsonpath={.metadata.annotations}")
    assert json.loads(read) == {"stowage.io/old": "x", "stowage.io/report": "v1"}
    kubectl("annotate", "node", "worker-1", "stowage.io/old-")
    assert core.read_node("worker-1").metadata.annotations == {"stowage.io/report": "v1"}


def test_get_pods_with_a_field_selector_and_json_output(kube, kubectl):
    kube.add_pod("a", node="worker-1")
    kube.add_pod("b", "other", node="worker-2")
    names = kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=worker-2", "-o", "name")
    assert names.split() == ["pod/b"]
    listed = json.loads(kubectl("get", "pods", "-n", "default", "-o", "json"))
    assert [p["metadata"]["name"] for p in listed["items"]] == ["a"]


@pytest.fixture
def server_tls(tmp_path) -> tuple[ssl.SSLContext, Path]:
    """A self-signed certificate for 127.0.0.1 (kubectl sends tokens only over TLS)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert


def test_kubectl_authenticates_with_the_kubeconfig_token(kubectl, server_tls):
    context, cert = server_tls
    with KubeApi.in_thread(require_auth=True, ssl_context=context) as api:
        api.add_token("admin-token", username="admin", groups=["system:masters"])
        api.add_node("worker-1")
        got = kubectl("get", "nodes", "-o", "name", api=api, token="admin-token", ca_file=cert)
        assert got.split() == ["node/worker-1"]
        with pytest.raises(AssertionError, match="must be logged in"):
            kubectl("get", "nodes", api=api, token="wrong", ca_file=cert)
