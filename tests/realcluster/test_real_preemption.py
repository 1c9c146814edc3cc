"""kube-scheduler's own preemption asking Stowage's ``preempt`` verb which victims it may
take, on the real control plane.

A critical pending pod (PriorityClass 1,000,000,000) fits nowhere. kube-scheduler finds
the victims its rules allow and sends them to the extender; Stowage answers only what its
own rules allow. First the only candidate is a *high* pod (priority 10,000): kube-scheduler
would take it, Stowage's levels do not (a pod displaces only pods two levels below its
own), so nothing is preempted and the pod stays pending. Then a node with a *low* pod
appears: Stowage allows that victim, kube-scheduler deletes it, and the preemptor lands
where it went.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from hack.cluster import coordinator, scheduling
from tests.kit import until
from tests.realcluster import kit

OWNER = "test-preemption"
NS = "rc-preempt"
POOL = {scheduling.POOL_LABEL: "preempt"}
CLASSES = {"rc-pre-critical": 1_000_000_000, "rc-pre-high": 10_000, "rc-pre-low": 0}
GPUS = {"nvidia.com/gpu": "8", "cpu": "1", "memory": "1Gi"}
SETTINGS = kit.coordinator_settings("rc-preemption")


@pytest.fixture(scope="module")
def kubeconfigs(
    cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path]]:
    cluster.apply(kit.shipped_rbac() + kit.scheduler_rbac())
    cluster.namespace(NS, OWNER)
    scheduling_api = client.SchedulingV1Api(cluster.api)
    for name, value in CLASSES.items():
        try:
            scheduling_api.create_priority_class({"metadata": {"name": name}, "value": value})
        except client.exceptions.ApiException as e:
            if e.status != 409:
                raise
    out = tmp_path_factory.mktemp("preemption")
    yield (
        cluster.kubeconfig_for(kit.COORDINATOR_SA, out / "coordinator.kubeconfig"),
        cluster.kubeconfig_for("stowage-scheduler", out / "scheduler.kubeconfig"),
    )
    cluster.delete_owned(OWNER)


def pod(name: str, priority_class: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priorityClassName": priority_class,
        "schedulerName": "stowage-scheduler",
        "nodeSelector": dict(POOL),
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {"name": "work", "image": "work:1", "resources": {"requests": GPUS, "limits": GPUS}}
        ],
    }
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


def events(cluster: kit.Cluster, name: str) -> list[Any]:
    selector = f"involvedObject.name={name}"
    return list(cluster.core.list_namespaced_event(NS, field_selector=selector).items)


def phase(cluster: kit.Cluster, name: str) -> str:
    try:
        found = cluster.core.read_namespaced_pod(name, NS)
    except client.exceptions.ApiException as e:
        if e.status == 404:
            return "gone"
        raise
    return "terminating" if found.metadata.deletion_timestamp else str(found.status.phase)


def test_kube_scheduler_preempts_only_the_victims_stowage_allows(
    cluster: kit.Cluster, kubeconfigs: tuple[Path, Path]
) -> None:
    coordinator_kubeconfig, scheduler_kubeconfig = kubeconfigs
    cluster.add_node("rc-pre-0", OWNER, gpus=8, labels=POOL)
    cluster.wait_ready(["rc-pre-0"])
    cluster.core.create_namespaced_pod(NS, pod("high", "rc-pre-high", node="rc-pre-0"))
    until(lambda: phase(cluster, "high") == "Running", "the high pod Running")
    with coordinator.running(cluster.plane, coordinator_kubeconfig, SETTINGS) as (_, url):
        config = scheduling.scheduler_config(extender_url=url, leader_elect=False)
        scheduler = cluster.plane.start_scheduler(config, kubeconfig=scheduler_kubeconfig)
        try:
            preempting(cluster, url)
        finally:
            scheduler.stop()


def preempting(cluster: kit.Cluster, url: str) -> None:
    """The pending critical pod, first with only the high pod to take, then the low one."""
    cluster.core.create_namespaced_pod(NS, pod("urgent", "rc-pre-critical"))
    until(
        lambda: (
            coordinator.metric(url, "stowage_request_duration_seconds_count", {"verb": "preempt"})
            >= 1
        ),
        "kube-scheduler's preemption asking the extender",
    )
    failed = until(
        lambda: [e for e in events(cluster, "urgent") if e.reason == "FailedScheduling"],
        "kube-scheduler's verdict after asking (FailedScheduling)",
    )
    assert "preemption" in failed[-1].message, failed[-1].message
    assert phase(cluster, "high") == "Running", "Stowage's levels keep the high pod"
    urgent = cluster.core.read_namespaced_pod("urgent", NS)
    assert urgent.spec.node_name is None and not urgent.status.nominated_node_name

    # The low pod is there before its node is: the preemptor never sees the node empty.
    cluster.core.create_namespaced_pod(NS, pod("low", "rc-pre-low", node="rc-pre-1"))
    cluster.add_node("rc-pre-1", OWNER, gpus=8, labels=POOL)
    until(lambda: phase(cluster, "low") == "gone", "kube-scheduler preempting the low pod", 90)
    landed = until(
        lambda: cluster.core.read_namespaced_pod("urgent", NS).spec.node_name,
        "the preemptor bound",
        60,
    )
    assert landed == "rc-pre-1"
    assert phase(cluster, "high") == "Running"
