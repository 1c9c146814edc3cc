"""Tenants kept apart per NUMA node: each rule over a live cluster of two 2-NUMA nodes
(112 CPUs a NUMA node, topology manager ``single-numa-node``), the pods counted from the
watch and placed by the agents' reports, through filter, prioritize and explain.

Every test names the guard it would catch the loss of."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest

from common.errors import ConfigError
from common.schema import (
    Absent,
    AllocatableSection,
    KubeletSettings,
    NodeReport,
    PodInfo,
    PodsSection,
    Resources,
)
from coordinator.config import CoordinatorSettings, PolicySettings, SignalSettings, TenancySettings
from coordinator.eviction.view import given_back
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.scoring import livefilters, tenancy
from coordinator.state.kubeobjects import pod_request
from coordinator.state.podrequest import PodRequest
from tests.hosts import FakeClock
from tests.kit import build_report

NODES = ("n1", "n2")
SERVING, TRAINING = "serving", "batch-training"


def settings(rule: str, numa_alignment: bool = True, **more: Any) -> CoordinatorSettings:
    return CoordinatorSettings(
        policy=PolicySettings(name="least-allocated"),  # prefers the emptier node
        signals=SignalSettings(
            numa_alignment=numa_alignment,
            tenancy=TenancySettings(
                rule=rule,
                training_priority_classes=[TRAINING],
                inference_priority_classes=[SERVING],
                **more,
            ),
        ),
    )


def node_json(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "224", "memory": "2Ti", "pods": "110"}
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def kube_pod(
    name: str,
    namespace: str,
    node: str | None = None,
    *,
    cpu: str = "8",
    pinned: bool = True,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """A pod; ``pinned``: Guaranteed with whole CPUs (kubelet puts it on one NUMA node)."""
    requests = {"cpu": cpu, "memory": "8Gi"}
    resources = (
        {"requests": requests, "limits": dict(requests)} if pinned else {"requests": requests}
    )
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": resources}]}
    if node:
        spec["nodeName"] = node
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def request(pod: dict[str, Any]) -> PodRequest:
    return pod_request(pod, 0)


def pod_info(pod: dict[str, Any], numa_nodes: list[int] | None) -> PodInfo:
    none = Resources(cpu_m=0, mem_b=0, gpu=0, hugepages_b=0, extended={})
    meta = pod["metadata"]
    return PodInfo(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        phase="Running",
        qos_class="Guaranteed",
        priority=0,
        priority_class=None,
        requests=none,
        limits=none,
        labels={},
        numa_nodes=numa_nodes,
    )


def report(
    node: str,
    placed: list[tuple[dict[str, Any], list[int] | None]],
    policy: str = "single-numa-node",
) -> NodeReport:
    """The agent's report of ``node``: its two NUMA nodes, kubelet's topology manager
    ``policy``, and each pod where it runs."""
    base = build_report(node, pods=0, gpus=0)
    pods = PodsSection(
        measured_at=base.measured_at, source="apiserver", pods=[pod_info(p, n) for p, n in placed]
    )
    allocatable = base.allocatable
    assert isinstance(allocatable, AllocatableSection)
    assert isinstance(allocatable.kubelet, KubeletSettings)
    kubelet = msgspec.structs.replace(allocatable.kubelet, topology_manager_policy=policy)
    allocatable = msgspec.structs.replace(allocatable, kubelet=kubelet)
    return msgspec.structs.replace(base, pods=pods, pod_usage=None, allocatable=allocatable)


class Cluster:
    """A live cluster of :data:`NODES` under one rule, and what it answers."""

    def __init__(self, rule: str, policy: str = "single-numa-node", **more: Any) -> None:
        self.clock = FakeClock()
        self.policy = policy
        self.live = LiveCluster(settings(rule, **more), self.clock, CoordinatorMetrics())
        self.placed: dict[str, list[tuple[dict[str, Any], list[int] | None]]] = {}
        """Per node, the pods its agent's next report lists and where they run."""
        for name in NODES:
            self.live.upsert_node(node_json(name))
            self.live.apply_report(report(name, [], policy))

    def run(self, pod: dict[str, Any], numa_nodes: list[int] | None, node: str = "n1") -> None:
        """Bind ``pod`` to ``node`` (the watch) and report it there on ``numa_nodes``."""
        bound = {**pod, "spec": {**pod["spec"], "nodeName": node}}
        bound["status"] = {"phase": "Running"}
        self.live.upsert_pod(bound)
        self.placed.setdefault(node, []).append((bound, numa_nodes))
        self.live.apply_report(report(node, self.placed[node], self.policy))

    def refused(self, pod: dict[str, Any]) -> dict[str, str]:
        found = self.live.filter(request(pod), NODES)
        assert not found.failed  # a tenancy refusal is always unresolvable
        return found.unresolvable

    def scores(self, pod: dict[str, Any]) -> dict[str, int]:
        return self.live.prioritize(request(pod), NODES)


# ------------------------------------------------------------------------ exclusive


def test_exclusive_keeps_another_tenant_off_a_full_node_not_a_free_numa_node() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [0])
    assert cluster.refused(kube_pod("b1", "team-b")) == {}  # NUMA node 1 is free
    cluster.run(kube_pod("a2", "team-a"), [1])
    refused = cluster.refused(kube_pod("b1", "team-b"))
    assert refused == {
        "n1": "NUMA tenancy (exclusive): no NUMA node with 8 CPUs is free of other tenants'"
        " pods (1 tenant kept apart, on 2 of 2 NUMA nodes)"
    }
    assert cluster.refused(kube_pod("a3", "team-a")) == {}  # its own tenant never blocks it


def test_a_pod_not_pinned_needs_every_numa_node_free() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [0])
    assert cluster.refused(kube_pod("b1", "team-b", pinned=False)) == {
        "n1": "NUMA tenancy (exclusive): the pod would run on every NUMA node (not pinned"
        " to one), and 1 of 2 NUMA nodes host other tenants' pods (1 tenant kept apart)"
    }


def test_a_numa_node_too_small_for_the_pod_is_no_room() -> None:
    cluster = Cluster("exclusive", numa_alignment=False)  # the tenancy rule alone judges
    cluster.run(kube_pod("a1", "team-a"), [0])
    reason = cluster.refused(kube_pod("b1", "team-b", cpu="120"))["n1"]  # 112 on NUMA node 1
    assert reason.startswith("NUMA tenancy (exclusive): no NUMA node with 120 CPUs")
    assert cluster.refused(kube_pod("b1", "team-b", cpu="112")) == {}


def test_a_pod_is_pinned_only_where_kubelets_topology_manager_aligns() -> None:
    cluster = Cluster("exclusive", policy="best-effort")
    cluster.run(kube_pod("a1", "team-a"), [0])
    reason = cluster.refused(kube_pod("b1", "team-b"))["n1"]
    assert "the pod would run on every NUMA node" in reason


def test_a_placement_on_numa_nodes_the_node_does_not_report_counts_everywhere() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [5])  # say, under a pods section kept unchanged
    assert "n1" in cluster.refused(kube_pod("b1", "team-b"))


def test_a_pod_not_placed_yet_counts_on_every_numa_node_until_a_report_places_it() -> None:
    cluster = Cluster("exclusive")
    cluster.live.upsert_pod(kube_pod("a1", "team-a", "n1"))  # bound; no report names it yet
    assert "n1" in cluster.refused(kube_pod("b1", "team-b"))
    cluster.run(kube_pod("a1", "team-a"), [0])
    assert cluster.refused(kube_pod("b1", "team-b")) == {}


def test_the_reason_counts_tenants_and_never_names_them() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [0])
    cluster.run(kube_pod("c1", "team-c"), [1])
    cluster.run(kube_pod("c2", "team-c"), [1])
    (reason,) = cluster.refused(kube_pod("b1", "team-b")).values()
    assert "2 tenants kept apart" in reason
    assert "team-a" not in reason and "team-c" not in reason


def test_infrastructure_pods_are_no_tenant() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("proxy", "kube-system", pinned=False), None)  # on every NUMA node
    assert cluster.refused(kube_pod("b1", "team-b")) == {}
    # …and a pod of theirs is not judged either.
    cluster.run(kube_pod("a1", "team-a", pinned=False), None)
    assert cluster.refused(kube_pod("dns", "kube-system", pinned=False)) == {}
    assert "n1" in cluster.refused(kube_pod("b1", "team-b"))


def test_no_rule_by_default_judges_nothing() -> None:
    cluster = Cluster("none")
    cluster.run(kube_pod("a1", "team-a", pinned=False), None)
    assert cluster.refused(kube_pod("b1", "team-b", pinned=False)) == {}
    assert "tenancy" not in cluster.live.explain(request(kube_pod("b1", "team-b")), "n1")
    assert SignalSettings().tenancy.rule == "none"


# ---------------------------------------------------------------- split by class


def test_split_keeps_training_and_inference_of_different_tenants_apart() -> None:
    cluster = Cluster("split-training-inference")
    cluster.run(kube_pod("serve", "team-a", priority_class=SERVING), [0, 1])
    # Inference beside inference is allowed; training and the unclassed are kept off.
    assert cluster.refused(kube_pod("b1", "team-b", priority_class=SERVING)) == {}
    for refused_class in (TRAINING, None):
        reason = cluster.refused(kube_pod("b1", "team-b", priority_class=refused_class))["n1"]
        assert reason.startswith("NUMA tenancy (split-training-inference): no NUMA node")


def test_split_counts_a_pod_of_no_class_as_both() -> None:
    cluster = Cluster("split-training-inference")
    cluster.run(kube_pod("plain", "team-a"), [0])  # no class: kept apart from everything
    cluster.run(kube_pod("serve", "team-a", priority_class=SERVING), [1])
    assert cluster.refused(kube_pod("b1", "team-b", priority_class=SERVING)) == {}  # NUMA 1
    assert "n1" in cluster.refused(kube_pod("b1", "team-b", priority_class=TRAINING))
    # Two pods of no class are not "of the same class": neither gets beside the other.
    cluster.run(kube_pod("plain2", "team-a"), [1])
    assert "n1" in cluster.refused(kube_pod("b1", "team-b"))


# ------------------------------------------------------------------ preference


def test_prioritize_prefers_a_numa_node_of_the_same_tenant() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [0])
    # least-allocated alone prefers the empty n2; the tenant's own NUMA node on n1 wins.
    assert cluster.scores(kube_pod("a2", "team-a")) == {"n1": 10, "n2": 0}
    assert cluster.scores(kube_pod("b1", "team-b")) == {"n1": 0, "n2": 10}
    off = Cluster("exclusive", prefer_same_tenant=False)
    off.run(kube_pod("a1", "team-a"), [0])
    assert off.scores(kube_pod("a2", "team-a")) == {"n1": 0, "n2": 10}


def test_explain_shows_each_numa_node_as_the_rule_sees_it() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [0])
    seen = cluster.live.explain(request(kube_pod("b1", "team-b")), "n1")["tenancy"]
    assert seen == {
        "rule": "exclusive",
        "tenant": "team-b",
        "classes": ["inference", "training"],
        "pinned": True,
        "numa_nodes": [
            {"node": 0, "cpus": 112, "kept_apart": True, "same_tenant": False, "open": False},
            {"node": 1, "cpus": 112, "kept_apart": False, "same_tenant": False, "open": True},
        ],
        "tenants_kept_apart": 1,
        "verdict": "passes",
        "same_tenant_bonus": 0.0,
    }
    own = cluster.live.explain(request(kube_pod("a2", "team-a")), "n1")["tenancy"]
    assert own["same_tenant_bonus"] == tenancy.PREFER_WEIGHT


# ---------------------------------------------------- what the planner sees, reports


def test_the_eviction_planner_skips_the_refused_node_and_a_what_if_state_refuses_too() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [0, 1])
    state, signals = cluster.live.state, cluster.live.settings.signals
    assert state is not None
    b1 = request(kube_pod("b1", "team-b"))
    rows = np.arange(len(state))
    assert livefilters.signal_refusals(state, b1, rows, signals).tolist() == [True, False]
    # One what-if row per set: n2's first, then n1's, each with nothing given back.
    after = given_back(state, np.array([1, 0]), [[], []])
    assert livefilters.refusals(after, b1, rows, signals).refused.tolist() == [False, True]


def test_a_pod_that_leaves_keeps_no_one_apart() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [0])
    cluster.run(kube_pod("a2", "team-a"), [1])
    assert "n1" in cluster.refused(kube_pod("b1", "team-b"))
    cluster.live.remove_pod(kube_pod("a2", "team-a", "n1"))
    assert cluster.refused(kube_pod("b1", "team-b")) == {}  # NUMA node 1 is free again


def test_what_is_worked_out_of_a_node_holds_for_one_classing_only() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [0, 1])
    state, b1 = cluster.live.state, request(kube_pod("b1", "team-b"))
    assert state is not None
    rows = np.arange(len(state))
    counted = tenancy.refused(state, b1, rows, TenancySettings(rule="exclusive"))
    assert counted is not None and counted[0].tolist() == [True, False]
    shared = TenancySettings(rule="exclusive", infrastructure_namespaces=["team-a"])
    ignored = tenancy.refused(state, b1, rows, shared)
    assert ignored is not None and ignored[0].tolist() == [False, False]


def test_an_unchanged_pods_section_keeps_the_placements() -> None:
    cluster = Cluster("exclusive")
    cluster.run(kube_pod("a1", "team-a"), [0])
    cluster.clock.advance(10)
    between = msgspec.structs.replace(report("n1", []), pods=Absent("unchanged"))
    assert cluster.live.apply_report(between)
    assert cluster.refused(kube_pod("b1", "team-b")) == {}  # still on NUMA node 0 alone
    gone = msgspec.structs.replace(report("n1", []), pods=Absent("pods-source-unreachable"))
    cluster.clock.advance(10)
    assert cluster.live.apply_report(gone)
    assert "n1" in cluster.refused(kube_pod("b1", "team-b"))  # not known: everywhere


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"rule": "strict"}, "signals.tenancy.rule: 'strict' is not one of none, exclusive"),
        (
            {"training_priority_classes": ["x"], "inference_priority_classes": ["x"]},
            "signals.tenancy: 'x' is both a training and an inference class",
        ),
    ],
)
def test_bad_settings_are_refused_naming_the_key(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TenancySettings(**values)
