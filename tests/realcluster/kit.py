"""What the real-cluster tests do to a cluster: the shipped RBAC, nodes, tokens, processes.

Everything goes through the real API server with the real ``kubernetes`` client. Objects a
module creates carry the label :data:`OWNER` with the module's name, and the module's
``owned`` fixture deletes them afterwards, so modules sharing the session's control plane
do not see each other's nodes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from hack.cluster import manifests, scheduling
from hack.cluster.controlplane import ControlPlane

REPO: Final = Path(__file__).resolve().parents[2]
NAMESPACE: Final = "stowage-system"
COORDINATOR_SA: Final = "stowage-coordinator"
AGENT_SA: Final = "stowage-agent"
AUDIENCE: Final = "stowage-coordinator"
OWNER: Final = "test.stowage.io/owner"


def coordinator_settings(lease_name: str, **more: Any) -> dict[str, Any]:
    """A coordinator's config for these tests: its namespace, its own Lease with
    kube-scheduler's 15/10/2 s timings scaled down to 3/2/0.5 s (order kept), and ``more``."""
    leader = {"lease_name": lease_name, "lease_duration_s": 3.0, "renew_deadline_s": 2.0,
              "retry_period_s": 0.5}  # fmt: skip
    return {"kube": {"namespace": NAMESPACE}, "leader": leader, **more}


def shipped_rbac() -> list[dict[str, Any]]:
    """What ``daemonset/base`` grants the coordinator and the agent."""
    return manifests.rbac(manifests.COORDINATOR_AND_AGENT)


def scheduler_rbac() -> list[dict[str, Any]]:
    """What ``daemonset/scheduler/second-scheduler`` grants ``stowage-scheduler``."""
    return manifests.rbac(manifests.SECOND_SCHEDULER)


class Cluster:
    """The session's control plane seen through the ``kubernetes`` client as its admin."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.api = config.new_client_from_config(config_file=str(plane.kubeconfig))
        self.core = client.CoreV1Api(self.api)

    def apply(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self.plane.apply(objects)

    def add_node(
        self,
        name: str,
        owner: str,
        *,
        gpus: int = 8,
        cpu: str = "96",
        memory: str = "768Gi",
        labels: Mapping[str, str] | None = None,
        pods: int = 110,
    ) -> None:
        """A Node object with this capacity (kwok plays its kubelet: it becomes Ready and
        keeps a Lease), labelled as owned by ``owner``."""
        capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, OWNER: owner, **(labels or {})},
            },
            "status": {"capacity": capacity, "allocatable": capacity},
        }
        self.core.create_node(body)

    def wait_ready(self, names: Iterable[str], timeout_s: float = 60.0) -> None:
        scheduling.wait_ready(self.core, names, timeout_s)

    def delete_owned(self, owner: str) -> None:
        """Delete the nodes and namespaces labelled as ``owner``'s."""
        selector = f"{OWNER}={owner}"
        for node in self.core.list_node(label_selector=selector).items:
            with contextlib.suppress(ApiException):
                self.core.delete_node(node.metadata.name)
        for ns in self.core.list_namespace(label_selector=selector).items:
            with contextlib.suppress(ApiException):
                self.core.delete_namespace(ns.metadata.name)

    def namespace(self, name: str, owner: str) -> str:
        body = {"metadata": {"name": name, "labels": {OWNER: owner}}}
        with contextlib.suppress(ApiException):  # 409: a rerun in the same session
            self.core.create_namespace(body)
        scheduling.wait_default_service_account(self.core, name)
        return name

    def token(
        self,
        service_account: str,
        namespace: str = NAMESPACE,
        audiences: tuple[str, ...] = (),
        bound_pod: client.V1Pod | None = None,
    ) -> str:
        """A real ServiceAccount token (TokenRequest), bound to ``bound_pod`` if given."""
        pod = None
        if bound_pod is not None:
            pod = {"metadata": {"name": bound_pod.metadata.name, "uid": bound_pod.metadata.uid}}
        return self.plane.token(service_account, namespace, audiences, pod)

    def kubeconfig_for(self, service_account: str, path: Path, namespace: str = NAMESPACE) -> Path:
        return self.plane.kubeconfig_for(service_account, namespace, path)
