"""A live cluster built from Node, Pod, PodDisruptionBudget and PodGroup objects as the
watches deliver them, and the planner's view of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coordinator.config import CoordinatorSettings, EvictionSettings, PolicySettings
from coordinator.eviction.view import ClusterView, view_of
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import Services
from coordinator.state.kubeobjects import pod_request
from coordinator.state.podfacts import PodFacts, pod_facts
from tests.hosts import FakeClock

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
NOW = 1_790_000_000.0
"""The wall-clock second the tests plan at."""


def node(name: str, cpu: str = "64", memory: str = "512Gi", gpus: int = 8, model: str = A100):
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    labels = {"kubernetes.io/hostname": name}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
        labels["nvidia.com/gpu.product"] = model
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def pod(
    name: str,
    *,
    node: str | None = None,
    gpus: int = 0,
    cpu: str = "1",
    memory: str = "1Gi",
    priority: int = 0,
    namespace: str = "ns",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    started_s_ago: float | None = None,
) -> dict[str, Any]:
    """A Pod; bound and Running when ``node`` is given, else Pending."""
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "main", "image": "x", "resources": resources}],
    }
    status: dict[str, Any] = {"phase": "Pending"}
    if node:
        spec["nodeName"] = node
        status = {"phase": "Running"}
        if started_s_ago is not None:
            status["startTime"] = NOW - started_s_ago
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": status,
    }


def podgroup(name: str, queue: str | None, namespace: str = "ns") -> dict[str, Any]:
    """A Volcano PodGroup in ``queue`` (None: no ``spec.queue``)."""
    spec: dict[str, Any] = {"minMember": 1}
    if queue is not None:
        spec["queue"] = queue
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pdb(name: str, match: dict[str, str], allowed: int, namespace: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {"selector": {"matchLabels": match}},
        "status": {"observedGeneration": 1, "disruptionsAllowed": allowed},
    }


def roomy_caps(**evictions: Any) -> CoordinatorSettings:
    """Settings whose caps per cycle let a plan of up to 32 victims through whole (a
    plan larger than the caps allow is never made), with ``evictions`` besides."""
    caps = {
        "max_per_cycle": 32,
        "max_per_node_per_cycle": 32,
        "max_per_namespace_per_cycle": 32,
        "eviction_burst": 32,
        **evictions,
    }
    return CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"), evictions=EvictionSettings(**caps)
    )


@dataclass
class EvictRig:
    """A live cluster fed by hand."""

    settings: CoordinatorSettings = field(
        default_factory=lambda: CoordinatorSettings(policy=PolicySettings(name="most-allocated"))
    )
    cluster: LiveCluster = field(init=False)
    clock: FakeClock = field(default_factory=FakeClock)

    def __post_init__(self) -> None:
        self.cluster = LiveCluster(self.settings, self.clock, CoordinatorMetrics())
        self.cluster.budgets.replace([])

    @property
    def evictions(self) -> EvictionSettings:
        return self.settings.evictions

    def nodes(self, *nodes: dict[str, Any]) -> EvictRig:
        for n in nodes:
            self.cluster.upsert_node(n)
        return self

    def pods(self, *pods: dict[str, Any]) -> EvictRig:
        for p in pods:
            self.cluster.upsert_pod(p)
        return self

    def budgets(self, *pdbs: dict[str, Any]) -> EvictRig:
        self.cluster.budgets.replace(pdbs)
        return self

    def podgroups(self, *groups: dict[str, Any]) -> EvictRig:
        self.cluster.podgroups.replace(groups)
        return self

    def view(self, cooldown_until: dict[str, float] | None = None) -> ClusterView:
        view = view_of(self.cluster, cooldown_until)
        assert view is not None
        return view

    def services(self) -> Services:
        """The coordinator's services over this cluster, for the ``/debug`` routes (which
        authenticate no one)."""
        return Services(
            settings=self.settings,
            clock=self.clock,
            metrics=self.cluster.metrics,
            cluster=self.cluster,
            authenticator=None,  # type: ignore[arg-type]  # /debug asks none
        )

    def facts(self, obj: dict[str, Any]) -> PodFacts:
        """The facts of a (pending) pod, as the planner takes them."""
        request = pod_request(obj, self.settings.signals.contiguity_threshold_b)
        return pod_facts(obj, request, self.evictions.level_label)
