"""Autoscaling hints on the real API server, the coordinator running with only its shipped
RBAC: a Volcano Queue (its CRD installed, ``status.allocated`` written through the status
subresource) and a namespace bounded by a ResourceQuota (``status.used`` kept by the real
quota controller, which counts the pending pods) each get the hint worked out by hand
below: the Queue as its annotation and an Event, the namespace as the Event alone (the
shipped RBAC grants no write on Namespaces or ResourceQuotas, and the API server refuses
one), both as the gauge; pods selecting a pool no node has get a ``ScaleDeadlock`` Warning
on their Queue. Nothing touches a Node or the Namespace."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from common import annotations as ann
from hack.cluster import coordinator
from tests.kit import until
from tests.realcluster import kit

OWNER = "test-scale-hints"
POOL = "karpenter.sh/nodepool"
GPU_NODE, CPU_NODE = "rc-hints-a100-0", "rc-hints-cpu-0"
VOLCANO_NS, QUOTA_NS = "rc-hints", "rc-hints-quota"
GROUP, VERSION, PLURAL = "scheduling.volcano.sh", "v1beta1", "queues"
ANY: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Cluster",
        "names": {"plural": PLURAL, "singular": "queue", "kind": "Queue"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": ANY, "status": ANY},
                    }
                },
            }
        ],
    },
}
"""Volcano's Queue CRD, cut down to what is read here (cluster-scoped, status subresource)."""


def pending(name: str, cpu: str, gpus: int, pool: str) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "1Gi"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "nobody",  # stays Pending
            "nodeSelector": {POOL: pool},
            "containers": [
                {"name": "work", "image": "work:1",
                 "resources": {"requests": resources, "limits": resources}}
            ],
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def setup(cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The Queue CRD and ``rc-hints`` Queue (16 GPUs, none allocated), the shipped RBAC, an
    8-GPU node in pool rc-hints-a100 and a 32-CPU node in pool rc-hints-cpu, and:

    * in ``rc-hints`` (the Queue's namespace, so its queue): two pending pods of 4 GPUs
      (1 CPU) for the a100 pool, and one of 1 CPU for pool rc-hints-h100, which no node has;
    * in ``rc-hints-quota`` (quota requests.cpu 64): three pending pods of 16 CPUs for the
      cpu pool."""
    extensions = client.ApiextensionsV1Api(cluster.api)
    with contextlib.suppress(client.exceptions.ApiException):  # 409: a rerun
        extensions.create_custom_resource_definition(CRD)
    until(lambda: established(extensions), "the Queue CRD established")
    cluster.apply(kit.shipped_rbac())
    cluster.add_node(GPU_NODE, OWNER, gpus=8, labels={POOL: "rc-hints-a100"})
    cluster.add_node(CPU_NODE, OWNER, gpus=0, cpu="32", labels={POOL: "rc-hints-cpu"})
    cluster.wait_ready([GPU_NODE, CPU_NODE])
    queues = client.CustomObjectsApi(cluster.api)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": VOLCANO_NS},
        "spec": {"capability": {"nvidia.com/gpu": "16"}},
    }
    with contextlib.suppress(client.exceptions.ApiException):
        queues.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    queues.patch_cluster_custom_object_status(
        GROUP, VERSION, PLURAL, VOLCANO_NS, {"status": {"allocated": {"nvidia.com/gpu": "0"}}}
    )
    cluster.namespace(VOLCANO_NS, OWNER)
    cluster.namespace(QUOTA_NS, OWNER)
    cluster.core.create_namespaced_resource_quota(
        QUOTA_NS, {"metadata": {"name": "cpu"}, "spec": {"hard": {"requests.cpu": "64"}}}
    )
    until(lambda: quota_used(cluster) == "0", "the quota controller's first status")
    for i in range(2):
        cluster.core.create_namespaced_pod(
            VOLCANO_NS, pending(f"train-{i}", "1", 4, "rc-hints-a100")
        )
    cluster.core.create_namespaced_pod(VOLCANO_NS, pending("lost", "1", 0, "rc-hints-h100"))
    for i in range(3):
        cluster.core.create_namespaced_pod(QUOTA_NS, pending(f"etl-{i}", "16", 0, "rc-hints-cpu"))
    until(lambda: quota_used(cluster) == "48", "the pending pods charged to the quota")
    path = tmp_path_factory.mktemp("hints") / "coordinator.kubeconfig"
    yield cluster.kubeconfig_for(kit.COORDINATOR_SA, path)
    cluster.delete_owned(OWNER)
    with contextlib.suppress(client.exceptions.ApiException):
        extensions.delete_custom_resource_definition(CRD["metadata"]["name"])


def established(extensions: client.ApiextensionsV1Api) -> bool:
    crd = extensions.read_custom_resource_definition(CRD["metadata"]["name"])
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def quota_used(cluster: kit.Cluster) -> str | None:
    quota = cluster.core.read_namespaced_resource_quota("cpu", QUOTA_NS)
    return ((quota.status and quota.status.used) or {}).get("requests.cpu")


def hint_on(queue: dict[str, Any]) -> dict[str, str] | None:
    """The hint's pairs on a Queue."""
    value = (queue["metadata"].get("annotations") or {}).get(ann.SCALE_HINT)
    return None if value is None else ann.parse(value)[0]


def events(cluster: kit.Cluster, kind: str, name: str) -> list[Any]:
    return cluster.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.kind={kind},involvedObject.name={name}"
    ).items


def reasons(cluster: kit.Cluster, kind: str, name: str) -> set[tuple[str, str]]:
    return {(e.type, e.reason) for e in events(cluster, kind, name)}


def told(cluster: kit.Cluster, kind: str, name: str) -> dict[str, str] | None:
    """The pairs of the latest ScaleHint Event's message (the annotation's value, a
    space, the reason)."""
    said = sorted(
        (e.last_timestamp, e.message)
        for e in events(cluster, kind, name)
        if e.reason == "ScaleHint"
    )
    return ann.parse(said[-1][1].split(" ", 1)[0])[0] if said else None


def test_each_queue_is_told_its_hint_and_the_deadlock(cluster: kit.Cluster, setup: Path) -> None:
    settings = kit.coordinator_settings("rc-scale-hints", autoscale={"interval_s": 0.5})
    queues = client.CustomObjectsApi(cluster.api)
    with coordinator.running(cluster.plane, setup, settings) as (_, url):
        # rc-hints: 2 × 4 GPUs pending + 2 standard jobs of 4 = 16, within the Queue's 16;
        # the a100 node has 8 free: 8 lacking, one node of 8 GPUs.
        until(
            lambda: (
                hint_on(queues.get_cluster_custom_object(GROUP, VERSION, PLURAL, VOLCANO_NS))
                == {"group": f"{POOL}:rc-hints-a100", "nodes": "1", "gap": "nvidia.com/gpu:8"}
            ),
            "the Volcano Queue's hint",
        )
        # rc-hints-quota: 3 × 16 CPUs pending + 2 × 16 = 80, within 64 - 48 used + the 48
        # pending = 64; the cpu node has 32 free: 32 lacking, one node of 32 CPUs.
        until(
            lambda: (
                told(cluster, "Namespace", QUOTA_NS)
                == {"group": f"{POOL}:rc-hints-cpu", "nodes": "1", "gap": "cpu:32"}
            ),
            "the quota namespace's hint, in its Event",
        )
        assert told(cluster, "Queue", VOLCANO_NS) == hint_on(
            queues.get_cluster_custom_object(GROUP, VERSION, PLURAL, VOLCANO_NS)
        )
        until(
            lambda: ("Warning", "ScaleDeadlock") in reasons(cluster, "Queue", VOLCANO_NS),
            "the deadlock's Warning on the Queue",
        )
        labels = {"queue": VOLCANO_NS, "group": f"{POOL}:rc-hints-a100"}
        assert coordinator.metric(url, "stowage_scale_hint_nodes", labels) == 1
        assert coordinator.metric(url, "stowage_scale_deadlocked_pods", {"queue": VOLCANO_NS}) == 1
        # Room again: the a100 pods are gone, the hint is cleared.
        for i in range(2):
            cluster.core.delete_namespaced_pod(f"train-{i}", VOLCANO_NS, grace_period_seconds=0)
        until(
            lambda: (
                hint_on(queues.get_cluster_custom_object(GROUP, VERSION, PLURAL, VOLCANO_NS))
                is None
            ),
            "the Queue's hint cleared",
        )
        until(
            lambda: ("Normal", "ScaleHintCleared") in reasons(cluster, "Queue", VOLCANO_NS),
            "the cleared Event",
        )
    # Hints only: nothing was written on the Nodes, nor on the Namespace.
    for notes in (
        *(cluster.core.read_node(name).metadata.annotations for name in (GPU_NODE, CPU_NODE)),
        cluster.core.read_namespace(QUOTA_NS).metadata.annotations,
    ):
        assert not [k for k in notes or {} if k.startswith("stowage.io/scale")]


def test_the_shipped_rbac_lets_the_coordinator_write_no_namespace_or_quota(
    cluster: kit.Cluster, setup: Path
) -> None:
    """A Namespace's labels decide its pods' security (``pod-security.kubernetes.io/
    enforce``), a ResourceQuota how much its pods may take: the coordinator's token may
    change neither."""
    api = config.new_client_from_config(config_file=str(setup))
    core = client.CoreV1Api(api)
    notes = {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    raised = {"spec": {"hard": {"requests.cpu": "1000"}}}
    for write in (
        lambda: core.patch_namespace(QUOTA_NS, notes),
        lambda: core.patch_namespaced_resource_quota("cpu", QUOTA_NS, raised),
    ):
        with pytest.raises(client.exceptions.ApiException) as refused:
            write()
        assert refused.value.status == 403
    assert core.list_node().items  # the token itself works
