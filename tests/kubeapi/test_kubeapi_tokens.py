"""TokenReview through ``AuthenticationV1Api`` (identities, node-name extras, audiences) and
the optional bearer-token authentication of the API itself."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from hack.kubeapi import KubeApi
from hack.kubeapi.tokens import API_AUDIENCE, NODE_NAME, POD_NAME


@pytest.fixture
def authn(api_client) -> client.AuthenticationV1Api:
    return client.AuthenticationV1Api(api_client)


def review(authn, token: str, audiences=None) -> client.V1TokenReviewStatus:
    body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=audiences))
    return authn.create_token_review(body).status


def test_a_node_bound_token_names_its_node(kube, authn):
    node = kube.add_node("worker-1")
    kube.add_token(
        "agent-token",
        node="worker-1",
        namespace="stowage",
        service_account="agent",
        audiences=["stowage"],
    )
    status = review(authn, "agent-token", ["stowage"])
    assert status.authenticated is True
    assert status.audiences == ["stowage"]
    assert status.user.username == "system:serviceaccount:stowage:agent"
    assert status.user.groups == [
        "system:serviceaccounts",
        "system:serviceaccounts:stowage",
        "system:authenticated",
    ]
    assert status.user.extra[NODE_NAME] == ["worker-1"]
    assert status.user.extra[POD_NAME] == ["agent-worker-1"]
    assert status.user.extra["authentication.kubernetes.io/node-uid"] == [node["metadata"]["uid"]]


def test_a_token_is_refused_for_an_audience_it_was_not_issued_for(kube, authn):
    kube.add_token("agent-token", node="worker-1", audiences=["stowage"])
    status = review(authn, "agent-token", ["someone-else"])
    assert not status.authenticated
    assert "invalid for the target audiences" in status.error
    assert not review(authn, "agent-token").authenticated  # the API server's own audience


def test_a_token_issued_without_audiences_is_bound_to_the_api_server(kube, authn):
    kube.add_token("plain", node="worker-1")
    assert review(authn, "plain").audiences == [API_AUDIENCE]
    assert not review(authn, "plain", ["stowage"]).authenticated


def test_an_unknown_token_is_not_authenticated(kube, api_client):
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "nope"},
    }
    method, url, headers, data, _ = api_client.param_serialize(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        body=body,
        header_params={"Content-Type": "application/json"},
    )
    response = api_client.call_api(method, url, headers, data)
    raw = json.loads(response.read())
    assert response.status == 201
    assert "authenticated" not in raw["status"]  # a false bool is omitted on the wire
    assert raw["status"]["error"] and raw["status"]["user"] == {}
    assert raw["spec"]["token"] == "nope"


def test_require_auth_refuses_calls_without_a_valid_token():
    with KubeApi.in_thread(require_auth=True) as kube:
        kube.add_token("admin", username="admin", groups=["system:masters"])
        kube.add_token("other-audience", node="worker-1", audiences=["stowage"])
        kube.add_node("worker-1")
        for token in (None, "wrong", "other-audience"):
            config = client.Configuration(host=kube.url)
            if token:
                config.api_key = {"BearerToken": token}
                config.api_key_prefix = {"BearerToken": "Bearer"}
            with client.ApiClient(config) as c, pytest.raises(ApiException) as caught:
                client.CoreV1Api(c).list_node()
            assert caught.value.status == 401
            assert json.loads(caught.value.body)["reason"] == "Unauthorized"
        config = client.Configuration(host=kube.url)
        config.api_key = {"BearerToken": "admin"}
        config.api_key_prefix = {"BearerToken": "Bearer"}
        with client.ApiClient(config) as c:
            assert [n.metadata.name for n in client.CoreV1Api(c).list_node().items] == ["worker-1"]
            assert client.VersionApi(c).get_code().major == "1"
        with client.ApiClient(client.Configuration(host=kube.url)) as c:
            assert client.VersionApi(c).get_code().git_version.startswith("v1.")
