"""Stowage's evictions through the real Eviction API, as the coordinator's ServiceAccount.

The API server itself enforces PodDisruptionBudgets, whose status the real disruption
controller (kube-controller-manager) computes; kwok plays the kubelet that confirms a
pod gone. Checked here: the executor's :class:`~coordinator.kube.evictions.Evictor` reads
a budget's refusal (429) as *blocked*, a ``dryRun=All`` eviction changes nothing, a real
one removes the pod, and a UID precondition spares a replacement; and the whole
coordinator, in its default dry run, plans a preemption and tells it in Events while every
pod stays where it is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from coordinator.kube.evictions import Evictor, Outcome
from coordinator.kube.leader import Fence
from hack.cluster import coordinator
from tests.kit import until
from tests.realcluster import kit

OWNER = "test-evictions"
NODE = "rc-evict-0"
NS = "rc-evict"
CRITICAL = "rc-critical"


@pytest.fixture(scope="module")
def setup(cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The shipped RBAC, one 8-GPU node, a namespace, a critical PriorityClass, and the
    coordinator ServiceAccount's kubeconfig."""
    cluster.apply(kit.shipped_rbac())
    cluster.add_node(NODE, OWNER, gpus=8)
    cluster.wait_ready([NODE])
    cluster.namespace(NS, OWNER)
    scheduling = client.SchedulingV1Api(cluster.api)
    try:
        scheduling.create_priority_class(
            {
                "metadata": {"name": CRITICAL},
                "value": 1_000_000_000,
                "preemptionPolicy": "PreemptLowerPriority",
            }
        )
    except client.exceptions.ApiException as e:
        if e.status != 409:
            raise
    path = tmp_path_factory.mktemp("evictions") / "coordinator.kubeconfig"
    yield cluster.kubeconfig_for(kit.COORDINATOR_SA, path)
    cluster.delete_owned(OWNER)


def bound_pod(cluster: kit.Cluster, name: str, gpus: int, labels: dict[str, str]) -> client.V1Pod:
    """A pod bound to :data:`NODE` (no scheduler involved), Running once kwok says so."""
    resources = {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}
    body = {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "work",
                    "image": "work:1",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
        },
    }
    cluster.core.create_namespaced_pod(NS, body)
    return until(lambda: running(cluster, name), f"pod {name} Running")


def running(cluster: kit.Cluster, name: str) -> client.V1Pod | None:
    pod = cluster.core.read_namespaced_pod(name, NS)
    return pod if pod.status.phase == "Running" else None


def gone(cluster: kit.Cluster, name: str) -> bool:
    try:
        cluster.core.read_namespaced_pod(name, NS)
    except client.exceptions.ApiException as e:
        return e.status == 404
    return False


def budget(cluster: kit.Cluster, name: str, min_available: int, app: str) -> None:
    """A PodDisruptionBudget, waited on until the disruption controller has observed it
    with the pods it covers."""
    policy = client.PolicyV1Api(cluster.api)
    body = {
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    }
    try:
        policy.create_namespaced_pod_disruption_budget(NS, body)
    except client.exceptions.ApiException as e:
        if e.status != 409:
            raise
        policy.patch_namespaced_pod_disruption_budget(
            name, NS, {"spec": {"minAvailable": min_available}}
        )

    def observed() -> bool:
        found = policy.read_namespaced_pod_disruption_budget(name, NS)
        status = found.status
        return bool(
            status
            and status.observed_generation == found.metadata.generation
            and status.expected_pods
        )

    until(observed, f"PodDisruptionBudget {name} observed by the disruption controller")


def disruptions_allowed(cluster: kit.Cluster, name: str) -> int:
    found = client.PolicyV1Api(cluster.api).read_namespaced_pod_disruption_budget(name, NS)
    return int(found.status.disruptions_allowed)


def evictor(kubeconfig: Path) -> Evictor:
    """The executor's evictor as the coordinator's ServiceAccount, its fence held."""
    fence = Fence(renew_deadline_s=3600.0, monotonic=time.monotonic)
    fence.renewed(time.monotonic())
    return Evictor(config.new_client_from_config(config_file=str(kubeconfig)), fence)


def test_the_api_server_enforces_budgets_and_dry_run_changes_nothing(
    cluster: kit.Cluster, setup: Path
) -> None:
    pods = [bound_pod(cluster, f"web-{i}", 1, {"app": "web"}) for i in range(2)]
    budget(cluster, "web", 2, "web")
    evict = evictor(setup)
    web0 = pods[0].metadata

    blocked = evict.evict(NS, web0.name, web0.uid, dry_run=True)
    assert blocked.outcome is Outcome.BLOCKED, blocked
    assert "web" in blocked.reason  # the API server's cause names the budget
    assert evict.evict(NS, web0.name, web0.uid, dry_run=False).outcome is Outcome.BLOCKED
    assert running(cluster, web0.name)

    budget(cluster, "web", 1, "web")
    assert disruptions_allowed(cluster, "web") == 1
    dry = evict.evict(NS, web0.name, web0.uid, dry_run=True)
    assert dry.outcome is Outcome.DRY_RUN, dry
    pod = cluster.core.read_namespaced_pod(web0.name, NS)
    assert pod.metadata.deletion_timestamp is None and pod.metadata.uid == web0.uid
    assert disruptions_allowed(cluster, "web") == 1, "a dry run spends no disruption"

    done = evict.evict(NS, web0.name, web0.uid, dry_run=False)
    assert done.outcome is Outcome.EVICTED, done
    until(lambda: gone(cluster, web0.name), "the evicted pod gone (kwok confirms the deletion)")
    assert evict.evict(NS, web0.name, web0.uid, dry_run=False).outcome is Outcome.GONE

    web1 = pods[1].metadata
    budget(cluster, "web", 0, "web")
    until(lambda: disruptions_allowed(cluster, "web") == 1, "the budget allowing one disruption")
    stale = evict.evict(NS, web1.name, "0b5e7c1a-0000-4000-8000-000000000000", dry_run=False)
    assert stale.outcome is Outcome.GONE, "the UID precondition spares another pod of the name"
    assert running(cluster, web1.name)
    # The real API server spends the disruption before the precondition fails the delete
    # (it stays spent until the disruption controller's two-minute timeout): an eviction
    # sent with a stale UID is not free, so the executor never retries one in a loop.
    assert disruptions_allowed(cluster, "web") == 0


def events_about(cluster: kit.Cluster, name: str) -> list[Any]:
    return list(
        cluster.core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items
    )


def test_the_coordinator_plans_a_preemption_in_dry_run_and_says_so_in_events(
    cluster: kit.Cluster, setup: Path
) -> None:
    victims = [bound_pod(cluster, f"batch-{i}", 4, {"app": "batch"}) for i in range(2)]
    for pod in cluster.core.list_namespaced_pod(NS, label_selector="app=web").items:
        cluster.core.delete_namespaced_pod(pod.metadata.name, NS)  # the GPUs are the batch pods'
    until(
        lambda: not cluster.core.list_namespaced_pod(NS, label_selector="app=web").items,
        "web pods gone",
    )
    resources = {"nvidia.com/gpu": "4", "cpu": "1", "memory": "1Gi"}
    cluster.core.create_namespaced_pod(
        NS,
        {
            "metadata": {"name": "urgent"},
            "spec": {
                "priorityClassName": CRITICAL,
                "schedulerName": "nobody",  # stays Pending: only Stowage's planner looks at it
                "containers": [
                    {
                        "name": "work",
                        "image": "work:1",
                        "resources": {"requests": resources, "limits": resources},
                    }
                ],
            },
        },
    )
    settings = kit.coordinator_settings("rc-evictions", evictions={"cycle_s": 1.0})
    with coordinator.running(cluster.plane, setup, settings):
        planned = until(
            lambda: [
                e for e in events_about(cluster, "urgent") if e.reason == "PreemptionExecuted"
            ],
            "the preemption told on the pending pod",
        )
        assert "would evict (dry run) 1 of 1 on rc-evict-0" in planned[0].message, planned[
            0
        ].message
        told = until(
            lambda: [
                e
                for v in victims
                for e in events_about(cluster, v.metadata.name)
                if e.reason == "WouldEvict"
            ],
            "the victim told it would be evicted",
        )
        assert told[0].source.component or told[0].reporting_component
    for victim in victims:
        pod = cluster.core.read_namespaced_pod(victim.metadata.name, NS)
        assert pod.metadata.deletion_timestamp is None and pod.status.phase == "Running"
    assert cluster.core.read_namespaced_pod("urgent", NS).spec.node_name is None
