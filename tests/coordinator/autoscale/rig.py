"""One small cluster for the autoscaling-hint tests, every figure of which the tests work
out by hand.

Nodes (allocatable; ``pool`` is ``karpenter.sh/nodepool``):

* ``a1``, ``a2`` — pool ``cpu``: 32 CPUs, 128 Gi;
* ``g1`` — pool ``gpu-a100``: 64 CPUs, 8 GPUs, A100, tainted ``nvidia.com/gpu:NoSchedule``;
* ``g2`` — pool ``gpu-a100``: 60 CPUs, 8 GPUs, the same (the template takes 60 CPUs);
* ``h1`` — no pool: 64 CPUs, 8 GPUs, H100, untainted;
* ``x1`` — no pool: 16 CPUs.

Queues:

* ``research`` — a Volcano Queue, capability 200 CPUs and 32 GPUs, allocated 40 CPUs and
  12 GPUs. Bound: ``r1``, ``r2`` (10 CPUs, 4 GPUs each) on g1, ``r3`` on g2. Pending,
  all selecting A100 and tolerating the taint: PodGroup ``train`` of two pods (8 CPUs,
  4 GPUs each), PodGroup ``eval`` of one.
* ``team-b`` — namespace quotas ``big`` (requests.cpu 64, used 10) and ``small`` (cpu 20,
  used 10: the least room, so it bounds). Bound: ``web`` (10 CPUs) on a1; none pending.
* ``batch`` — namespace quota ``q`` (requests.cpu 1000, used 60: its pending pods, as
  the quota controller counts them). Pending: ``b1``..``b3`` (20 CPUs each) selecting
  pool ``cpu``.
* ``team-c`` — no quota. Pending: ``lost`` selecting pool ``gpu-h100``, which no node has.
"""

from __future__ import annotations

from typing import Any

from coordinator.autoscale import hints
from coordinator.autoscale.capacity import Capacities
from coordinator.config import AutoscaleSettings, CoordinatorSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from tests.hosts import FakeClock

POOL = "karpenter.sh/nodepool"
GPU = "nvidia.com/gpu"
A100 = {"nvidia.com/gpu.product": "A100"}
TOLERATE = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]


def node(name: str, cpu: int, gpus: int = 0, labels: dict[str, str] | None = None,
         tainted: bool = False) -> dict[str, Any]:  # fmt: skip
    allocatable = {"cpu": str(cpu), "memory": "128Gi", "pods": "110"}
    if gpus:
        allocatable[GPU] = str(gpus)
    spec = {"taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}]} if tainted else {}
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def pod(name: str, namespace: str, cpu: int, gpus: int = 0, *, on: str | None = None,
        group: str | None = None, selector: dict[str, str] | None = None,
        tolerations: list[dict[str, str]] | None = None,
        labels: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    requests = {"cpu": str(cpu)}
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if group is not None:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    if labels:
        meta["labels"] = labels
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": requests, "limits": limits}}],
        "nodeSelector": selector or {},
        "tolerations": tolerations or [],
    }
    if on is not None:
        spec["nodeName"] = on
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running" if on else "Pending"}}


def queue(
    name: str, capability: dict[str, str], allocated: dict[str, str] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name}, "spec": {"capability": capability}}
    if allocated is not None:
        body["status"] = {"allocated": allocated}
    return body


def quota(namespace: str, name: str, hard: dict[str, str], used: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"hard": hard},
        "status": {"hard": hard, "used": used},
    }


def research_pending(**extra: Any) -> list[dict[str, Any]]:
    shape = {"selector": A100, "tolerations": TOLERATE, **extra}
    return [
        pod("t1", "ml", 8, 4, group="train", **shape),
        pod("t2", "ml", 8, 4, group="train", **shape),
        pod("e1", "ml", 8, 4, group="eval", **shape),
    ]


class Rig:
    def __init__(self, research_allocated: dict[str, str] | None = None) -> None:
        self.clock = FakeClock()
        self.metrics = CoordinatorMetrics()
        self.cluster = LiveCluster(CoordinatorSettings(), self.clock, self.metrics)
        self.cluster.replace_nodes(
            [
                node("a1", 32, labels={POOL: "cpu"}),
                node("a2", 32, labels={POOL: "cpu"}),
                node("g1", 64, 8, labels={POOL: "gpu-a100", **A100}, tainted=True),
                node("g2", 60, 8, labels={POOL: "gpu-a100", **A100}, tainted=True),
                node("h1", 64, 8, labels={"nvidia.com/gpu.product": "H100"}),
                node("x1", 16),
            ]
        )
        self.cluster.podgroups.replace(
            [
                {"metadata": {"namespace": "ml", "name": g}, "spec": {"queue": "research"}}
                for g in ("train", "eval", "run")
            ]
        )
        self.capacities = Capacities()
        self.capacities.replace_queues(
            [
                queue(
                    "research",
                    {"cpu": "200", GPU: "32"},
                    research_allocated or {"cpu": "40", GPU: "12"},
                )
            ]
        )
        self.capacities.replace_quotas(
            [
                quota("team-b", "big", {"requests.cpu": "64"}, {"requests.cpu": "10"}),
                quota("team-b", "small", {"cpu": "20"}, {"cpu": "10"}),
                quota("batch", "q", {"requests.cpu": "1000"}, {"requests.cpu": "60"}),
            ]
        )
        for p in (
            pod("r1", "ml", 10, 4, on="g1", group="run", selector=A100, tolerations=TOLERATE),
            pod("r2", "ml", 10, 4, on="g1", group="run", selector=A100, tolerations=TOLERATE),
            pod("r3", "ml", 10, 4, on="g2", group="run", selector=A100, tolerations=TOLERATE),
            *research_pending(),
            pod("web", "team-b", 10, on="a1"),
            *(pod(f"b{i}", "batch", 20, selector={POOL: "cpu"}) for i in (1, 2, 3)),
            pod("lost", "team-c", 4, selector={POOL: "gpu-h100"}),
        ):
            self.cluster.upsert_pod(p)

    def plan(self, **settings: Any) -> hints.Hints:
        chosen = AutoscaleSettings(**settings)
        return hints.plan(hints.view_of(self.cluster, self.capacities, chosen), chosen)

    def hint(self, queue: str, **settings: Any) -> hints.Hint:
        return next(h for h in self.plan(**settings).hints if h.queue == queue)
