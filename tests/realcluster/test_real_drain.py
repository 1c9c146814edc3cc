"""A drain on the real control plane, as the coordinator's ServiceAccount with the shipped
RBAC: a PodDisruptionBudget whose real disruption controller allows nothing keeps the
node from being drained at all; once it allows one, the node is tainted
``stowage.io/disrupted:NoSchedule`` (the JSON patch guarded by its resourceVersion,
against the real API server) before the Eviction API removes its pod, and switching
drains off takes the taint back off, leaving the operator's own taint as it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from coordinator.config import (
    CoordinatorSettings,
    DrainSettings,
    EventSettings,
    EvictionSettings,
    PolicySettings,
)
from coordinator.consolidation.drain import DISRUPTED
from coordinator.consolidation.drainer import STARTED, Drainer
from coordinator.consolidation.taint import taint_writer
from coordinator.decisionlog import DecisionLog
from coordinator.eviction.executor import Executor
from coordinator.kube.approvals import ApprovalReader
from coordinator.kube.events import EventRecorder
from coordinator.kube.evictions import Evictor
from coordinator.kube.leader import Fence
from coordinator.metrics import CoordinatorMetrics
from tests.coordinator.eviction.evictrig import EvictRig
from tests.hosts import FakeClock
from tests.kit import until
from tests.realcluster import kit

OWNER = "test-drain"
NS = "rc-drain"
EMPTY, FULLER = "rc-drain-a", "rc-drain-b"
TEAM_TAINT = {"key": "team", "value": "x", "effect": "PreferNoSchedule"}


@pytest.fixture(scope="module")
def setup(cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The shipped RBAC, two CPU nodes (one carrying an operator's taint), a namespace,
    and the coordinator ServiceAccount's kubeconfig."""
    cluster.apply(kit.shipped_rbac())
    cluster.add_node(EMPTY, OWNER, gpus=0, cpu="16", memory="64Gi")
    cluster.add_node(FULLER, OWNER, gpus=0, cpu="16", memory="64Gi")
    cluster.core.patch_node(EMPTY, {"spec": {"taints": [TEAM_TAINT]}})
    cluster.wait_ready([EMPTY, FULLER])
    cluster.namespace(NS, OWNER)
    path = tmp_path_factory.mktemp("drain") / "coordinator.kubeconfig"
    yield cluster.kubeconfig_for(kit.COORDINATOR_SA, path)
    cluster.delete_owned(OWNER)


def controller(cluster: kit.Cluster) -> dict[str, Any]:
    """An object in the namespace to stand for the pods' controller: the garbage collector
    keeps a pod whose owner exists, and a drain moves only pods with a controller."""
    try:
        owner = cluster.core.create_namespaced_config_map(NS, {"metadata": {"name": "owner"}})
    except client.exceptions.ApiException as e:
        if e.status != 409:
            raise
        owner = cluster.core.read_namespaced_config_map("owner", NS)
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner.metadata.uid, "controller": True}  # fmt: skip


def running_pod(cluster: kit.Cluster, name: str, node: str, labels: dict[str, str]) -> None:
    body = {
        "metadata": {"name": name, "labels": labels, "ownerReferences": [controller(cluster)]},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "team", "operator": "Exists"}],
            "containers": [{"name": "w", "image": "w:1", "resources": {"requests": {"cpu": "2"}}}],
        },
    }
    cluster.core.create_namespaced_pod(NS, body)
    until(
        lambda: cluster.core.read_namespaced_pod(name, NS).status.phase == "Running",
        f"pod {name} Running",
    )


def observed_budget(cluster: kit.Cluster, min_available: int) -> None:
    """The ``web`` budget at ``min_available``, once the disruption controller says so."""
    policy = client.PolicyV1Api(cluster.api)
    body = {"spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}}
    try:
        policy.create_namespaced_pod_disruption_budget(NS, {"metadata": {"name": "web"}, **body})
    except client.exceptions.ApiException as e:
        if e.status != 409:
            raise
        policy.patch_namespaced_pod_disruption_budget("web", NS, body)

    def observed() -> bool:
        found = policy.read_namespaced_pod_disruption_budget("web", NS)
        status = found.status
        return bool(
            status
            and status.observed_generation == found.metadata.generation
            and status.expected_pods
        )

    until(observed, "budget web observed")


def live_view(cluster: kit.Cluster) -> Any:
    """The coordinator's view of the real objects, fed as its watches feed it."""
    plain = cluster.api.sanitize_for_serialization
    rig = EvictRig(settings=CoordinatorSettings(policy=PolicySettings(name="most-allocated")))
    owned = f"{kit.OWNER}={OWNER}"
    rig.nodes(*plain(cluster.core.list_node(label_selector=owned).items))
    rig.pods(*plain(cluster.core.list_namespaced_pod(NS).items))
    budgets = client.PolicyV1Api(cluster.api).list_namespaced_pod_disruption_budget(NS).items
    rig.budgets(*plain(budgets))
    return rig.view()


def drainer(kubeconfig: Path, enabled: bool) -> Drainer:
    """The drainer as the leader wires it, as the coordinator's ServiceAccount."""
    api = config.new_client_from_config(config_file=str(kubeconfig))
    clock = FakeClock()
    fence = Fence(3600.0, clock.monotonic)
    fence.renewed(clock.monotonic())
    metrics = CoordinatorMetrics()
    evictor = Evictor(api, fence)
    events = EventRecorder(client.CoreV1Api(api), fence, clock, EventSettings(), metrics)
    evictions = EvictionSettings(enabled=True)
    executor = Executor(
        evictions, evictor, events, evictor, ApprovalReader(api, kit.NAMESPACE), metrics,
        clock, DecisionLog(),
    )  # fmt: skip
    return Drainer(
        DrainSettings(enabled=enabled), evictions, executor, taint_writer(api), events, fence,
        clock,
    )  # fmt: skip


def taints(cluster: kit.Cluster) -> list[str]:
    return [t.key for t in cluster.core.read_node(EMPTY).spec.taints or []]


def pods(cluster: kit.Cluster) -> set[str]:
    return {
        p.metadata.name
        for p in cluster.core.list_namespaced_pod(NS).items
        if p.metadata.deletion_timestamp is None
    }


async def test_a_drain_on_the_real_api_server(cluster: kit.Cluster, setup: Path) -> None:
    running_pod(cluster, "web", EMPTY, {"app": "web"})
    running_pod(cluster, "busy", FULLER, {"app": "busy"})
    observed_budget(cluster, min_available=1)  # the one web pod may not go

    plan = await drainer(setup, enabled=True).run(live_view(cluster), [EMPTY])
    assert plan is not None and plan.drains == ()
    assert "PodDisruptionBudget(s) rc-drain/web" in plan.blocked[0].reason
    assert taints(cluster) == ["team"]

    observed_budget(cluster, min_available=0)
    plan = await drainer(setup, enabled=True).run(live_view(cluster), [EMPTY])
    assert plan is not None
    assert [(m.pod, m.destination) for d in plan.drains for m in d.moves] == [
        ("rc-drain/web", FULLER)
    ]
    assert taints(cluster) == ["team", DISRUPTED]
    until(lambda: pods(cluster) == {"busy"}, "web evicted")
    reasons = [
        e.reason
        for e in cluster.core.list_namespaced_event("default").items
        if e.involved_object.name == EMPTY
    ]
    assert STARTED in reasons and "ConsolidationEviction" in reasons

    assert await drainer(setup, enabled=False).run(live_view(cluster), [EMPTY]) is None
    assert taints(cluster) == ["team"]
