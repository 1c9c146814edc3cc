"""The OpenAPI documents and field validation: plain ``kubectl apply`` (validation on, its
default) creates, reapplies unchanged and refuses a typo with the apiserver's strict
decoding message; ``kubectl explain`` reads the schemas; the documents carry what kubectl
looks up; and ``fieldValidation`` (Ignore, Warn, Strict) through the Python client."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from tests.kubeapi.kubeapi_support import needs_kubectl

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: main
    image: nginx
    resources:
      requests: {cpu: 100m}
"""
LEASE = """\
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: holder, namespace: default}
spec: {holderIdentity: me, leaseDurationSeconds: 15}
"""


@needs_kubectl
def test_kubectl_apply_with_validation_creates_then_leaves_unchanged(kube, kubectl, core):
    assert kubectl("apply", "-f", "-", stdin=POD).strip() == "pod/web created"
    assert kubectl("apply", "-f", "-", stdin=POD).strip() == "pod/web unchanged"
    pod = core.read_namespaced_pod("web", "default")
    assert pod.spec.containers[0].resources.requests == {"cpu": "100m"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in pod.metadata.annotations
    changed = POD.replace("image: nginx", "image: nginx:1.27")
    assert kubectl("apply", "-f", "-", stdin=changed).strip() == "pod/web configured"
    assert core.read_namespaced_pod("web", "default").spec.containers[0].image == "nginx:1.27"
    assert (
        kubectl("apply", "-f", "-", stdin=LEASE).strip()
        == "lease.coordination.k8s.io/holder created"
    )


@needs_kubectl
def test_kubectl_apply_refuses_a_field_typo_with_the_strict_decoding_message(
    kube, kubectl_run, core
):
    typo = POD.replace("    image: nginx", "    imagee: nginx")
    done = kubectl_run("apply", "-f", "-", stdin=typo)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Pod in version "v1" '
        "cannot be handled as a Pod: strict decoding error: "
        'unknown field "spec.containers[0].imagee"'
    )
    assert core.list_namespaced_pod("default").items == []
    kubectl_run("apply", "-f", "-", stdin=POD)
    done = kubectl_run("apply", "-f", "-", stdin=typo)  # now a patch of the existing pod
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        'error when patching "STDIN": strict decoding error: unknown field '
        '"spec.containers[0].imagee"'
    )


@needs_kubectl
def test_kubectl_patch_without_strict_warns_and_drops_the_field(kube, kubectl_run, core):
    kube.add_node("worker-1")
    done = kubectl_run("patch", "node", "worker-1", "--type=merge", "-p", '{"spec":{"foo":1}}')
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == 'Warning: unknown field "spec.foo"'
    assert core.read_node("worker-1").spec.to_dict().get("foo") is None


@needs_kubectl
def test_kubectl_explain_reads_the_schemas(kube, kubectl):
    spec = kubectl("explain", "pod.spec")
    assert "FIELD: spec <PodSpec>" in spec
    assert "containers\t<[]Container> -required-" in spec
    holder = kubectl("explain", "lease.spec.holderIdentity")
    assert "FIELD: holderIdentity <string>" in holder


def get(api_client, kube, path, accept="application/json"):
    return api_client.rest_client.pool_manager.request(
        "GET", kube.url + path, headers={"Accept": accept}
    )


def test_the_v3_index_and_documents(kube, api_client):
    index = get(api_client, kube, "/openapi/v3").json()["paths"]
    assert set(index) == {
        "api/v1",
        "apis/coordination.k8s.io/v1",
        "apis/policy/v1",
        "apis/authentication.k8s.io/v1",
    }
    url = index["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    answer = get(api_client, kube, url)
    assert answer.headers["Cache-Control"] == "public, immutable"
    doc = answer.json()
    schemas = doc["components"]["schemas"]
    pod = schemas["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    assert pod["properties"]["spec"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}
    ]
    assert schemas["io.k8s.api.core.v1.PodSpec"]["required"] == ["containers"]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert (
        containers["x-kubernetes-patch-strategy"],
        containers["x-kubernetes-patch-merge-key"],
    ) == (
        "merge",
        "name",
    )
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
    for path, item in doc["paths"].items():
        for method in ("post", "put", "patch"):
            if method in item:  # what kubectl looks for before leaving validation to us
                names = {p["name"] for p in item[method]["parameters"] if p["in"] == "query"}
                assert "fieldValidation" in names, (path, method)
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Pod", "version": "v1"}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    binding = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"]
    assert binding["x-kubernetes-group-version-kind"]["kind"] == "Binding"
    policy = get(api_client, kube, index["apis/policy/v1"]["serverRelativeURL"]).json()
    pdb = policy["components"]["schemas"]["io.k8s.api.policy.v1.PodDisruptionBudget"]
    assert pdb["x-kubernetes-group-version-kind"][0]["group"] == "policy"
    assert get(api_client, kube, "/openapi/v3/apis/widgets/v1").status == 404


def test_v2_is_json_only(kube, api_client):
    protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    refused = get(api_client, kube, "/openapi/v2", accept=protobuf)
    assert (refused.status, refused.json()["reason"]) == (406, "NotAcceptable")
    doc = get(api_client, kube, "/openapi/v2", accept=f"{protobuf}, application/json").json()
    assert doc["swagger"] == "2.0"
    spec = doc["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"]
    assert spec["allOf"] == [{"$ref": "#/definitions/io.k8s.api.core.v1.PodSpec"}]
    assert "#/components/" not in json.dumps(doc)


def raw(api_client, kube, method, path, body, content_type="application/json"):
    return api_client.rest_client.pool_manager.request(
        method,
        kube.url + path,
        body=body if isinstance(body, str) else json.dumps(body),
        headers={"Content-Type": content_type},
    )


NODE = {"metadata": {"name": "n1"}, "spec": {"podCIDR": "10.1.0.0/24", "podCIDRx": "typo"}}


def test_field_validation_directives_on_create(kube, api_client, core):
    strict = raw(api_client, kube, "POST", "/api/v1/nodes?fieldValidation=Strict", NODE)
    assert (strict.status, strict.json()["message"]) == (
        400,
        'Node in version "v1" cannot be handled as a Node: strict decoding error: '
        'unknown field "spec.podCIDRx"',
    )
    with pytest.raises(ApiException):
        core.read_node("n1")
    warned = raw(api_client, kube, "POST", "/api/v1/nodes", NODE)  # Warn is the default
    assert warned.status == 201
    assert warned.headers.getlist("Warning") == ['299 - "unknown field \\"spec.podCIDRx\\""']
    assert warned.json()["spec"] == {"podCIDR": "10.1.0.0/24"}
    ignored = raw(
        api_client, kube, "POST", "/api/v1/nodes?fieldValidation=Ignore",
        {**NODE, "metadata": {"name": "n2"}},
    )  # fmt: skip
    assert ignored.status == 201 and "Warning" not in ignored.headers
    assert core.read_node("n2").spec.pod_cidr == "10.1.0.0/24"
    bad = raw(api_client, kube, "POST", "/api/v1/nodes?fieldValidation=Loud", NODE)
    assert (bad.status, bad.json()["message"]) == (
        422,
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": '
        'supported values: "", "Ignore", "Strict", "Warn"',
    )


def test_duplicate_fields_are_strict_errors(kube, api_client):
    body = '{"metadata": {"name": "a", "name": "b"}}'
    answer = raw(api_client, kube, "POST", "/api/v1/namespaces?fieldValidation=Strict", body)
    assert (answer.status, answer.json()["message"]) == (
        400,
        'Namespace in version "v1" cannot be handled as a Namespace: strict decoding error: '
        'duplicate field "metadata.name"',
    )


def test_patches_and_updates_are_decoded_too(kube, api_client, core):
    kube.add_pod("p", node="worker-1")
    path = "/api/v1/namespaces/default/pods/p"
    answer = raw(
        api_client, kube, "PATCH", path + "?fieldValidation=Strict",
        {"spec": {"containers": [{"name": "main", "imagee": "x"}]}},
        "application/strategic-merge-patch+json",
    )  # fmt: skip
    assert (answer.status, answer.json()["message"]) == (
        400,
        'strict decoding error: unknown field "spec.containers[0].imagee"',
    )
    pod = get(api_client, kube, path).json()
    pod["metadata"]["labels"] = {"x": "y"}
    pod["status"]["phasee"] = "Done"
    answer = raw(api_client, kube, "PUT", path + "/status?fieldValidation=Strict", pod)
    assert answer.status == 400
    assert answer.json()["message"].endswith('unknown field "status.phasee"')
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="l"), spec=client.V1LeaseSpec(holder_identity="me")
    )
    coordination = client.CoordinationV1Api(api_client)
    created = coordination.create_namespaced_lease("default", lease, field_validation="Strict")
    assert created.spec.holder_identity == "me"


def test_strict_binding_body(kube, api_client, core):
    kube.add_pod("p", phase="Pending")
    body = {"metadata": {"name": "p"}, "target": {"name": "worker-1", "nam": "x"}}
    path = "/api/v1/namespaces/default/pods/p/binding?fieldValidation=Strict"
    answer = raw(api_client, kube, "POST", path, body)
    assert (answer.status, answer.json()["message"]) == (
        400,
        'Binding in version "v1" cannot be handled as a Binding: strict decoding error: '
        'unknown field "target.nam"',
    )
    assert core.read_namespaced_pod("p", "default").spec.node_name is None


@needs_kubectl
def test_server_side_dry_run_stores_nothing(kube, kubectl, core):
    kube.add_node("worker-1")
    rv = core.list_node().metadata.resource_version
    assert kubectl("apply", "--dry-run=server", "-f", "-", stdin=POD).strip() == (
        "pod/web created (server dry run)"
    )
    assert core.list_namespaced_pod("default").items == []
    kubectl("label", "node", "worker-1", "team=a", "--dry-run=server")
    kubectl("delete", "node", "worker-1", "--dry-run=server")
    node = core.read_node("worker-1")
    assert "team" not in node.metadata.labels
    assert core.list_node().metadata.resource_version == rv  # nothing was written


def test_dry_run_answers_what_would_be_stored_and_refuses_other_values(kube, api_client, core):
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")]),
    )
    would = core.create_namespaced_pod("default", pod, dry_run="All")
    assert (would.metadata.uid is not None, would.metadata.resource_version) == (True, None)
    assert would.status.phase == "Pending"
    kube.add_pod("q")
    deleted = core.delete_namespaced_pod("q", "default", dry_run="All")
    assert deleted.metadata.name == "q"
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["q"]
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", pod, dry_run="Some")
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: "Some": '
        'supported values: "All"'
    )
