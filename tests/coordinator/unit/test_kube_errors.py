"""Kubernetes client errors as the coordinator sees them: the API server's own message
(from its Status object) and its Retry-After, from real answers of the emulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from coordinator.kube.client import KubeError, api_client, metadata, name_of, translate
from hack.kubeapi import KubeApi
from hack.kubeapi.faults import Fault


@pytest.fixture
def core() -> Iterator[tuple[KubeApi, client.CoreV1Api]]:
    with KubeApi.in_thread() as api:
        c = api_client(host=api.url)
        yield api, client.CoreV1Api(c)
        c.close()


def failure(call: object) -> ApiException:
    with pytest.raises(ApiException) as raised:
        call()  # type: ignore[operator]
    return raised.value


def test_a_429_keeps_its_retry_after_and_a_404_names_what_is_missing(core) -> None:
    api, core_v1 = core
    api.add_node("worker-1")
    api.faults.add(Fault.error(429, retry_after_s=7, method="GET", path=r"/nodes/worker-1$"))
    error = translate("read node", failure(lambda: core_v1.read_node("worker-1")))
    assert (error.status, error.retry_after_s) == (429, 7.0)
    assert str(error) == "read node: HTTP 429 Too many requests, please try again later."
    error = translate("read node", failure(lambda: core_v1.read_node("nowhere")))
    assert (error.status, error.retry_after_s) == (404, None)
    assert str(error) == 'read node: HTTP 404 nodes "nowhere" not found'


@pytest.mark.parametrize(
    ("header", "expected"),
    [("3", 3.0), ("0", 0.0), ("soon", None), ("-1", None), ("nan", None), ("inf", None)],
)
def test_retry_after_is_whole_seconds_or_nothing(header: str, expected: float | None) -> None:
    e = ApiException(status=429, reason="Too Many Requests")
    e.headers = {"Retry-After": header}
    e.body = "not json"
    error = translate("patch", e)
    assert error.retry_after_s == expected
    assert str(error) == "patch: HTTP 429 Too Many Requests"  # no Status: the HTTP reason


def test_no_answer_is_status_zero() -> None:
    error = translate("patch", ConnectionRefusedError("refused"))
    assert (error.status, error.retry_after_s) == (0, None)
    assert str(error) == "patch: ConnectionRefusedError: refused"


def test_an_object_without_metadata_or_name_is_refused_by_kind() -> None:
    """The client's models allow what the API server never sends: a clear KubeError, not
    an AttributeError deep in a caller."""
    with pytest.raises(KubeError, match="^V1Node without metadata$"):
        metadata(client.V1Node())
    with pytest.raises(KubeError, match="^V1ConfigMap without a name$"):
        name_of(client.V1ConfigMap(metadata=client.V1ObjectMeta(uid="u-1")))
    named = client.V1Node(metadata=client.V1ObjectMeta(name="worker-1", uid="u-2"))
    assert (name_of(named), metadata(named).uid) == ("worker-1", "u-2")
