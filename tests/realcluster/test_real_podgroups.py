"""A pod's queue from its Volcano PodGroup, on the real API server with the PodGroup CRD
installed, the coordinator running with only its shipped RBAC: the queue a preemption plan
follows (its cooldown and approval rule) is the PodGroup's ``spec.queue`` as the watch
delivers it, never the queue the pod's annotation names, and the namespace's strictest
queue once the PodGroup is gone."""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from hack.cluster import coordinator
from tests.kit import free_port, until
from tests.realcluster import kit

OWNER = "test-podgroups"
NODE = "rc-podgroups-0"
NS = "rc-podgroups"
CRITICAL = "rc-podgroups-critical"
GROUP, VERSION, PLURAL = "scheduling.volcano.sh", "v1beta1", "podgroups"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "podgroup", "kind": "PodGroup"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "queue": {"type": "string"},
                                    "minMember": {"type": "integer"},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}
"""Volcano's PodGroup CRD, cut down to the fields read here."""


@pytest.fixture(scope="module")
def setup(cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The shipped RBAC, the PodGroup CRD, an 8-GPU node full of a low pod, a pending
    critical pod in PodGroup ``job``, and the coordinator ServiceAccount's kubeconfig."""
    extensions = client.ApiextensionsV1Api(cluster.api)
    with contextlib.suppress(client.exceptions.ApiException):  # 409: a rerun
        extensions.create_custom_resource_definition(CRD)
    until(lambda: established(extensions), "the PodGroup CRD established")
    cluster.apply(kit.shipped_rbac())
    cluster.add_node(NODE, OWNER, gpus=8)
    cluster.wait_ready([NODE])
    cluster.namespace(NS, OWNER)
    with contextlib.suppress(client.exceptions.ApiException):  # 409: a rerun
        client.SchedulingV1Api(cluster.api).create_priority_class(
            {"metadata": {"name": CRITICAL}, "value": 1_000_000_000}
        )
    resources = {"nvidia.com/gpu": "8", "cpu": "1", "memory": "1Gi"}
    container = {
        "name": "work",
        "image": "work:1",
        "resources": {"requests": resources, "limits": resources},
    }
    cluster.core.create_namespaced_pod(
        NS, {"metadata": {"name": "low"}, "spec": {"nodeName": NODE, "containers": [container]}}
    )
    cluster.core.create_namespaced_pod(
        NS,
        {
            "metadata": {
                "name": "urgent",
                "annotations": {
                    "scheduling.k8s.io/group-name": "job",
                    "scheduling.volcano.sh/queue-name": "made-up",
                },
            },
            "spec": {
                "priorityClassName": CRITICAL,
                "schedulerName": "nobody",  # stays Pending: only Stowage's planner looks at it
                "containers": [container],
            },
        },
    )
    path = tmp_path_factory.mktemp("podgroups") / "coordinator.kubeconfig"
    yield cluster.kubeconfig_for(kit.COORDINATOR_SA, path)
    cluster.delete_owned(OWNER)
    with contextlib.suppress(client.exceptions.ApiException):
        extensions.delete_custom_resource_definition(CRD["metadata"]["name"])


def established(extensions: client.ApiextensionsV1Api) -> bool:
    crd = extensions.read_custom_resource_definition(CRD["metadata"]["name"])
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def podgroup(name: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"queue": queue, "minMember": 1},
    }


def plan(url: str) -> dict[str, Any] | None:
    """The plan for the urgent pod, asked of the coordinator's debug listener at ``url``."""
    with urllib.request.urlopen(f"{url}/debug/plan?pod={NS}/urgent", timeout=5) as response:
        return json.loads(response.read()).get("plan")


def test_the_plan_follows_the_podgroup_s_queue(cluster: kit.Cluster, setup: Path) -> None:
    groups = client.CustomObjectsApi(cluster.api)
    groups.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, podgroup("job", "research"))
    groups.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, podgroup("other", "batch"))
    settings = kit.coordinator_settings(
        "rc-podgroups", evictions={"queue_weights": {"research": 80, "made-up": 0}}
    )
    debug_port = free_port()
    with coordinator.running(cluster.plane, setup, settings, debug_port=debug_port) as (_, url):

        def queue() -> tuple[str, bool] | None:
            found = plan(f"http://127.0.0.1:{debug_port}")
            return None if found is None else (found["queue"], found["needs_approval"])

        until(lambda: queue() == ("research", True), "the plan in the PodGroup's queue")
        groups.patch_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, "job", {"spec": {"queue": "batch"}}
        )
        until(lambda: queue() == ("batch", False), "the plan in the PodGroup's new queue")
        groups.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "job")
        groups.patch_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, "other", {"spec": {"queue": "research"}}
        )
        # Its PodGroup gone, the pod's queue is the strictest of its namespace's as far as
        # known: the namespace's own and the other PodGroup's, now the heavy research.
        until(lambda: queue() == ("research", True), "the strictest of the namespace's queues")
        restarts = {"resource": "podgroups", "cause": "error"}
        assert coordinator.metric(url, "stowage_watch_restarts_total", restarts) == 0
