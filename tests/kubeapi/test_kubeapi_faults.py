"""Injected faults, seen through the official client: the Status objects and headers a
real apiserver sends, writes that do not happen, slow answers that still land, watches
cut mid-stream or ended by an in-band 410, and the matching rules (method, path, watch,
agent, skip, times)."""

from __future__ import annotations

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client import ApiException

from hack.kubeapi import KubeApi
from hack.kubeapi.faults import Fault
from tests.kubeapi.kubeapi_support import status_of

MERGE = "application/merge-patch+json"
NODE_PATH = r"^/api/v1/nodes/worker-1$"


def annotate(core: client.CoreV1Api, value: str, **options: object) -> object:
    body = {"metadata": {"annotations": {"a": value}}}
    return core.patch_node("worker-1", body, _content_type=MERGE, **options)


def annotation(kube: KubeApi) -> str | None:
    from hack.kubeapi.resources import NODES

    return (kube.store.get(NODES, "", "worker-1")["metadata"].get("annotations") or {}).get("a")


@pytest.mark.parametrize(
    ("code", "reason"),
    [(409, "Conflict"), (500, "InternalError"), (503, "ServiceUnavailable"), (404, "NotFound")],
)
def test_an_error_fault_answers_its_status_object_and_writes_nothing(
    kube: KubeApi, core: client.CoreV1Api, code: int, reason: str
) -> None:
    kube.add_node("worker-1")
    fault = kube.faults.add(Fault.error(code, method="PATCH", path=NODE_PATH))
    with pytest.raises(ApiException) as raised:
        annotate(core, "1")
    assert raised.value.status == code
    status = status_of(raised.value)
    assert (status["kind"], status["status"], status["code"], status["reason"]) == (
        "Status", "Failure", code, reason,
    )  # fmt: skip
    assert annotation(kube) is None
    assert fault.hits == 1
    annotate(core, "2")  # times=1: spent
    assert annotation(kube) == "2"


def test_429_carries_retry_after_in_the_header_and_the_details(
    kube: KubeApi, core: client.CoreV1Api
) -> None:
    kube.add_node("worker-1")
    kube.faults.add(Fault.error(429, retry_after_s=3, method="PATCH", path=NODE_PATH))
    with pytest.raises(ApiException) as raised:
        annotate(core, "1")
    assert raised.value.status == 429
    assert raised.value.headers["Retry-After"] == "3"
    status = status_of(raised.value)
    assert status["reason"] == "TooManyRequests"
    assert status["details"]["retryAfterSeconds"] == 3


def test_matching_by_method_path_agent_skip_and_times(
    kube: KubeApi, api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    kube.add_node("worker-1")
    kube.add_node("worker-2")
    fault = kube.faults.add(
        Fault.error(500, method="PATCH", path=NODE_PATH, agent="chaos", skip=1, times=2)
    )
    annotate(core, "1")  # another agent: not matched
    core.read_node("worker-1")  # GET: not matched
    api_client.user_agent = "chaos"
    annotate(core, "2")  # skipped
    for value in ("3", "4"):
        with pytest.raises(ApiException):
            annotate(core, value)
    core.patch_node("worker-2", {"metadata": {"labels": {"x": "y"}}}, _content_type=MERGE)
    annotate(core, "5")  # spent
    assert (fault.seen, fault.hits, annotation(kube)) == (4, 2, "5")
    with pytest.raises(ValueError, match="status"):
        Fault.error(299)


def test_a_slow_answer_times_the_client_out_and_the_write_still_lands(
    kube: KubeApi, core: client.CoreV1Api
) -> None:
    """As with a real apiserver: a timeout says nothing about whether the write happened."""
    kube.add_node("worker-1")
    kube.faults.add(Fault.slow(1.0, method="PATCH", path=NODE_PATH))
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        annotate(core, "late", _request_timeout=0.2)
    watcher = watch.Watch()
    for event in watcher.stream(core.list_node, timeout_seconds=10):
        if (event["object"].metadata.annotations or {}).get("a") == "late":
            watcher.stop()
    assert annotation(kube) == "late"


def test_a_dropped_watch_is_cut_mid_stream(kube: KubeApi, core: client.CoreV1Api) -> None:
    for i in range(3):
        kube.add_node(f"worker-{i}")
    kube.faults.add(Fault.drop_watch(after=2, path=r"^/api/v1/nodes$"))
    names = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for event in watch.Watch().stream(core.list_node, timeout_seconds=10):
            names.append(event["object"].metadata.name)
    assert names == ["worker-0", "worker-1"]
    # The next watch is served in full.
    watcher = watch.Watch()
    again = []
    for event in watcher.stream(core.list_node, timeout_seconds=10):
        again.append(event["object"].metadata.name)
        if len(again) == 3:
            watcher.stop()
    assert again == ["worker-0", "worker-1", "worker-2"]


def test_an_expired_watch_ends_with_an_in_band_410(kube: KubeApi, core: client.CoreV1Api) -> None:
    kube.add_node("worker-1")
    rv = core.list_node().metadata.resource_version
    kube.add_node("worker-2")
    kube.add_node("worker-3")
    kube.faults.add(Fault.expire_watch(after=1, path=r"^/api/v1/nodes$"))
    names = []
    with pytest.raises(ApiException) as raised:
        for event in watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=10):
            names.append(event["object"].metadata.name)
    assert names == ["worker-2"]
    assert raised.value.status == 410
