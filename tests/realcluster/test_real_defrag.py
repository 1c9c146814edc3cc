"""A GPU defragmentation migration carried out on the real control plane, with the real
kube-scheduler asking Stowage's extender, and the moved pod's new home reserved for its
replacement.

Two 8-GPU nodes each run one 1-GPU pod of the Deployment ``small`` (bound there by hand,
as a fragmented cluster would have them); the 8-GPU pod ``big`` fits on neither, and
kube-scheduler cannot preempt for it (every pod has priority 0). The coordinator
(``defrag.enabled``, ``evictions.enabled``) plans the migration, reserves the destination
for the moved pod's replacement and evicts it through the Eviction API; the
ReplicaSet controller (kube-controller-manager) creates the replacement, kube-scheduler
binds it where the plan said (the extender's filter answers the reserved node alone) and
binds ``big`` to the room freed for it. Once the replacement is bound the leader releases
the reservation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from coordinator.consolidation.reserver import RELEASED, RESERVED
from hack.cluster import coordinator, scheduling
from tests.kit import until
from tests.realcluster import kit

OWNER = "test-defrag"
NS = "rc-defrag"
POOL = {scheduling.POOL_LABEL: "defrag"}
NODES = ("rc-defrag-a", "rc-defrag-b")
SETTINGS = kit.coordinator_settings(
    "rc-defrag",
    defrag={"enabled": True},
    evictions={"enabled": True, "cycle_s": 0.5, "reservation_ttl_s": 60.0},
)


@pytest.fixture(scope="module")
def kubeconfigs(
    cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path]]:
    cluster.apply(kit.shipped_rbac() + kit.scheduler_rbac())
    cluster.namespace(NS, OWNER)
    for name in NODES:
        cluster.add_node(name, OWNER, gpus=8, labels=POOL)
    cluster.wait_ready(NODES)
    out = tmp_path_factory.mktemp("defrag")
    yield (
        cluster.kubeconfig_for(kit.COORDINATOR_SA, out / "coordinator.kubeconfig"),
        cluster.kubeconfig_for("stowage-scheduler", out / "scheduler.kubeconfig"),
    )
    cluster.delete_owned(OWNER)


def spec(gpus: int) -> dict[str, Any]:
    resources = {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}
    return {
        "schedulerName": "stowage-scheduler",
        "nodeSelector": dict(POOL),
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {"name": "work", "image": "work:1",
             "resources": {"requests": resources, "limits": resources}}
        ],
    }  # fmt: skip


def small_pods(cluster: kit.Cluster) -> dict[str, Any]:
    """The Deployment's pods not being deleted, by name."""
    found = cluster.core.list_namespaced_pod(NS, label_selector="app=small").items
    return {p.metadata.name: p for p in found if p.metadata.deletion_timestamp is None}


def fragmented(cluster: kit.Cluster) -> dict[str, str]:
    """The Deployment ``small`` (two 1-GPU pods, no scheduler running yet) with one pod
    bound to each node; pod → node."""
    deployment = {
        "metadata": {"name": "small"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "small"}},
            "template": {"metadata": {"labels": {"app": "small"}}, "spec": spec(1)},
        },
    }
    client.AppsV1Api(cluster.api).create_namespaced_deployment(NS, deployment)
    names = sorted(until(lambda: len(small_pods(cluster)) == 2 and small_pods(cluster), "2 pods"))
    placed = dict(zip(names, NODES, strict=True))
    for name, node in placed.items():
        binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
        cluster.core.create_namespaced_pod_binding(name, NS, binding, _preload_content=False)
    until(
        lambda: all(p.status.phase == "Running" for p in small_pods(cluster).values()),
        "both small pods Running",
    )
    return placed


def node_events(cluster: kit.Cluster, node: str, reason: str) -> list[Any]:
    selector = f"involvedObject.name={node},reason={reason}"
    return list(cluster.core.list_namespaced_event("default", field_selector=selector).items)


def test_a_migration_moves_a_pod_to_its_reserved_home_and_the_big_pod_binds(
    cluster: kit.Cluster, kubeconfigs: tuple[Path, Path]
) -> None:
    coordinator_kubeconfig, scheduler_kubeconfig = kubeconfigs
    placed = fragmented(cluster)
    with coordinator.running(cluster.plane, coordinator_kubeconfig, SETTINGS) as (_, url):
        config = scheduling.scheduler_config(extender_url=url, leader_elect=False)
        scheduler = cluster.plane.start_scheduler(config, kubeconfig=scheduler_kubeconfig)
        try:
            cluster.core.create_namespaced_pod(NS, {"metadata": {"name": "big"}, "spec": spec(8)})
            landed = until(
                lambda: cluster.core.read_namespaced_pod("big", NS).spec.node_name,
                "big bound after the migration",
                90,
            )
            (moved,) = [pod for pod, node in placed.items() if node == landed]
            (home,) = [node for node in NODES if node != landed]
            reserved = until(lambda: node_events(cluster, home, RESERVED), "room reserved")
            assert f"replacement of {NS}/{moved}" in reserved[0].message
            pods = until(
                lambda: (
                    (found := small_pods(cluster)).keys() != placed.keys()
                    and len(found) == 2
                    and all(p.spec.node_name for p in found.values())
                    and found
                ),
                "the replacement bound",
            )
            (replacement,) = pods.keys() - placed.keys()
            assert pods[replacement].spec.node_name == home  # where the plan put it
            assert moved not in pods
            released = until(lambda: node_events(cluster, home, RELEASED), "reservation released")
            assert "its replacement was placed" in released[0].message
        finally:
            scheduler.stop()
