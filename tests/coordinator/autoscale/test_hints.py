"""The hints' arithmetic on the cluster of :mod:`tests.coordinator.autoscale.rig`, every
expected figure worked out by hand in the comments (cpu in milli-cores)."""

from __future__ import annotations

from typing import Any

import pytest

from common.errors import ConfigError
from coordinator.autoscale.capacity import QUOTA, VOLCANO, Capacities
from coordinator.config import AutoscaleSettings
from tests.coordinator.autoscale.rig import GPU, POOL, Rig, quota, research_pending

A100_POOL = f"{POOL}:gpu-a100"
CPU_POOL = f"{POOL}:cpu"


def test_a_queue_short_of_gpus_is_told_to_grow_the_pool_that_takes_its_pods() -> None:
    hint = Rig().hint("research")
    # Jobs pending: train (2 pods: 16 CPUs, 8 GPUs) and eval (8 CPUs, 4 GPUs); the lower
    # median of each resource is the standard job: 8 CPUs, 4 GPUs.
    assert hint.standard == {"cpu": 8000, GPU: 4}
    # Pending 24 CPUs, 12 GPUs, plus two standard jobs: 40 CPUs, 20 GPUs; the queue's
    # headroom (200 - 40 CPUs, 32 - 12 GPUs) leaves both as they are.
    assert hint.demand == {"cpu": 40000, GPU: 20}
    # Only g1 and g2 take the shape (A100, the taint tolerated; h1 is an H100). g1 has no
    # GPU free, room a standard pod cannot use; g2 has 60 - 10 CPUs and 8 - 4 GPUs.
    assert hint.room == {"cpu": 50000, GPU: 4}
    assert hint.gap == {GPU: 16}
    # The a100 pool's nodes offer 8 GPUs: ceil(16 / 8) = 2; the cpu pool offers none.
    assert (hint.group, hint.nodes, hint.pending, hint.source) == (A100_POOL, 2, 3, VOLCANO)
    assert hint.reason == (
        "queue research: 3 pending pod(s) and 2 standard job(s) (cpu 8, nvidia.com/gpu 4)"
        " want cpu 40, nvidia.com/gpu 20, 1 node(s) have cpu 50, nvidia.com/gpu 4 free for"
        " them; lacking nvidia.com/gpu 16: add 2 node(s) of karpenter.sh/nodepool:gpu-a100"
        " (nvidia.com/gpu 8 each)"
    )


def test_demand_never_exceeds_what_the_queue_may_still_hold() -> None:
    # Allocated 28 of 32 GPUs: demand is 4 GPUs, and g2 has 4 free: no gap.
    hint = Rig(research_allocated={"cpu": "40", GPU: "28"}).hint("research")
    assert hint.demand == {"cpu": 40000, GPU: 4}
    assert (hint.gap, hint.group, hint.nodes, hint.scale) == ({}, None, 0, False)
    assert hint.reason.endswith(": room enough")


def test_the_reserve_of_standard_jobs_is_a_setting() -> None:
    # No reserve: 12 GPUs pending against 4 free, 8 lacking: one a100 node.
    hint = Rig().hint("research", reserve_jobs=0)
    assert (hint.demand, hint.gap, hint.nodes) == ({"cpu": 24000, GPU: 12}, {GPU: 8}, 1)


def test_a_hint_asks_for_at_most_max_nodes() -> None:
    hint = Rig().hint("research", max_nodes=1)
    assert (hint.group, hint.nodes, hint.gap) == (A100_POOL, 1, {GPU: 16})
    assert hint.reason.endswith(", capped at autoscale.max_nodes 1")


def test_a_quota_queue_with_room_gets_no_scale() -> None:
    hint = Rig().hint("team-b")
    # Bounded by the quota with the least room: 20 CPUs, 10 used. Nothing pending: the
    # standard job is the bound pod, 10 CPUs; two of them, 20, capped at the 10 left.
    assert (hint.source, hint.pending, hint.standard, hint.demand) == (
        QUOTA, 0, {"cpu": 10000}, {"cpu": 10000},
    )  # fmt: skip
    # Untainted nodes a 10-CPU pod fits now: a1 (22 free), a2 (32), h1 (64), x1 (16).
    assert hint.room == {"cpu": 134000}
    assert (hint.gap, hint.group, hint.nodes) == ({}, None, 0)


def test_the_fewest_nodes_of_a_group_the_pods_may_use_not_of_the_biggest() -> None:
    hint = Rig().hint("batch")
    # 3 pending pods of 20 CPUs plus two standard jobs: 100 CPUs. They select pool cpu:
    # a1 (22 free) and a2 (32) take a 20-CPU pod: 54. Lacking 46: ceil(46 / 32) = 2 cpu
    # nodes (an a100 node, 60 CPUs, would need one, but the pods may not go there).
    assert (hint.demand, hint.room, hint.gap) == (
        {"cpu": 100000}, {"cpu": 54000}, {"cpu": 46000},
    )  # fmt: skip
    assert (hint.group, hint.nodes) == (CPU_POOL, 2)


def test_no_group_taking_the_pods_is_a_hint_of_no_group_saying_why() -> None:
    rig = Rig()
    for name in ("g1", "g2"):
        rig.cluster.remove_node(name)
    hint = rig.hint("research")
    # No node takes the shape now: the whole demand lacks; only the cpu pool is known.
    assert (hint.room, hint.gap) == ({"cpu": 0, GPU: 0}, {"cpu": 40000, GPU: 20})
    assert (hint.group, hint.nodes, hint.scale) == (None, 0, True)
    assert hint.reason.endswith(
        "; lacking cpu 40, nvidia.com/gpu 20, but no known node group takes its largest pod"
        " (karpenter.sh/nodepool:cpu: node a new node does not match the pod's node selector"
        " or affinity)"
    )


def test_pods_selecting_a_pool_no_node_has_are_a_deadlock() -> None:
    found = Rig().plan()
    assert [(d.queue, d.wants, d.pods, d.example, d.known) for d in found.deadlocks] == [
        ("team-c", f"{POOL}=gpu-h100", 1, "team-c/lost", (CPU_POOL, A100_POOL))
    ]
    assert found.deadlocks[0].reason == (
        "1 pending pod(s) of queue team-c (e.g. team-c/lost) select karpenter.sh/nodepool="
        "gpu-h100, which no node group an autoscaler grows has (known: karpenter.sh/nodepool:"
        "cpu, karpenter.sh/nodepool:gpu-a100); nothing will scale for them"
    )
    # team-c has no quota: no hint, only the deadlock.
    assert [h.queue for h in found.hints] == ["batch", "research", "team-b"]


def test_a_pool_asked_through_node_affinity_is_judged_too() -> None:
    rig = Rig()
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [
                        {"key": POOL, "operator": "In", "values": ["gpu-h100", "gpu-b200"]}
                    ]}
                ]
            }
        }
    }  # fmt: skip
    stuck = {
        "metadata": {"name": "aff", "namespace": "team-c", "uid": "uid-aff"},
        "spec": {"containers": [{"name": "c"}], "affinity": affinity},
        "status": {"phase": "Pending"},
    }
    rig.cluster.upsert_pod(stuck)
    wants = [d.wants for d in rig.plan().deadlocks]
    assert wants == [f"{POOL} In (gpu-b200,gpu-h100)", f"{POOL}=gpu-h100"]
    # A term one pool satisfies is no deadlock.
    expressions = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expressions["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["gpu-h100", "cpu"]
    rig.cluster.upsert_pod(stuck)
    assert [d.wants for d in rig.plan().deadlocks] == [f"{POOL}=gpu-h100"]


def test_a_pods_own_labels_steer_nothing_and_odd_shapes_are_only_counted() -> None:
    rig = Rig()
    before = rig.hint("research")
    # The owner labels the pending pods with the cpu pool, and adds a pod of its own shape
    # selecting the cpu pool: the work stays the commonest shape, the hint the same.
    for p in research_pending(labels={POOL: "cpu"}):
        rig.cluster.upsert_pod(p)
    from tests.coordinator.autoscale.rig import pod

    rig.cluster.upsert_pod(pod("odd", "ml", 30, group="train", selector={POOL: "cpu"}))
    after = rig.hint("research")
    assert (after.group, after.nodes, after.gap, after.other_shapes) == (
        before.group, before.nodes, before.gap, 1,
    )  # fmt: skip
    assert before.other_shapes == 0


def test_quotas_bound_by_requests_and_the_tightest_wins() -> None:
    capacities = Capacities()
    capacities.replace_quotas(
        [
            quota("ns", "a", {"requests.cpu": "8", "limits.cpu": "2", "pods": "3"},
                  {"requests.cpu": "1", "limits.cpu": "2", "pods": "3"}),
            quota("ns", "b", {"requests.nvidia.com/gpu": "0", "memory": "1Gi"},
                  {"memory": "512Mi"}),
            quota("ns", "c", {"requests.cpu": "4"}, {"requests.cpu": "3"}),
        ]
    )  # fmt: skip
    bound = capacities.bounds()["ns"]
    # cpu: a leaves 7, c leaves 1: c bounds. limits.* and pods say nothing of room.
    assert bound.capability == {"cpu": 4000, GPU: 0, "memory": 2**30}
    assert bound.allocated == {"cpu": 3000, GPU: 0, "memory": 2**29}


def test_a_volcano_queue_takes_its_name_from_a_namespace_and_a_bad_one_is_dropped() -> None:
    capacities = Capacities()
    capacities.replace_quotas([quota("ml", "q", {"cpu": "4"}, {"cpu": "0"})])
    capacities.replace_queues([{"metadata": {"name": "ml"}, "spec": {"capability": {"cpu": "9"}}}])
    assert capacities.bounds()["ml"].source == VOLCANO
    assert capacities.bounds()["ml"].allocated is None  # counted from its pods instead
    capacities.upsert_queue({"metadata": {"name": "ml"}, "spec": {"capability": {"cpu": "x"}}})
    assert capacities.bounds()["ml"].source == QUOTA  # the bad Queue is gone, not half-read


def test_a_gated_pod_is_not_pending_work() -> None:
    rig = Rig()
    gated = research_pending()[0]
    gated["metadata"].update(name="gated", uid="uid-gated")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    rig.cluster.upsert_pod(gated)
    hint = rig.hint("research")
    assert (hint.pending, hint.demand, hint.nodes) == (3, {"cpu": 40000, GPU: 20}, 2)


def test_a_template_never_keeps_a_node_s_own_name() -> None:
    from coordinator.autoscale import groups

    rig = Rig()
    rig.cluster.remove_node("a2")  # the cpu pool is a1 alone
    (cpu, _) = groups.groups(rig.cluster.node_facts, (POOL,), {})
    assert cpu.nodes == ("a1",)
    assert dict(cpu.template.labels) == {POOL: "cpu"}
    assert cpu.template.allocatable == {"cpu": 32000, "memory": 128 * 2**30, "pods": 110}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_nodes": 0}, "autoscale.max_nodes: expected 1..10000"),
        ({"reserve_jobs": -1}, "autoscale.reserve_jobs: expected 0..100"),
        ({"group_labels": ()}, "autoscale.group_labels: expected one or more label keys"),
        ({"group_labels": ("a=b",)}, "autoscale.group_labels: expected one or more label keys"),
        ({"interval_s": 0.0}, "autoscale.interval_s: must be positive"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AutoscaleSettings(**settings)


def test_of_the_groups_taking_the_pods_the_one_needing_fewest_nodes() -> None:
    from tests.coordinator.autoscale.rig import node, pod

    rig = Rig()
    rig.cluster.upsert_node(node("c1", 64, labels={POOL: "cpu-large"}))
    rig.capacities.upsert_quota(quota("wide", "q", {"requests.cpu": "1000"}, {}))
    for i in range(6):
        rig.cluster.upsert_pod(pod(f"w{i}", "wide", 30))
    hint = rig.hint("wide")
    # 6 × 30 + 2 × 30 = 240 CPUs wanted. Untainted nodes a 30-CPU pod fits now: a2 (32
    # free), h1 (64), c1 (64): 160. Lacking 80: 3 cpu nodes (32 each) or 2 cpu-large (64).
    assert (hint.demand, hint.room, hint.gap) == (
        {"cpu": 240000}, {"cpu": 160000}, {"cpu": 80000},
    )  # fmt: skip
    assert (hint.group, hint.nodes) == (f"{POOL}:cpu-large", 2)


def test_a_quota_s_used_already_counts_its_pending_pods() -> None:
    from tests.coordinator.autoscale.rig import pod

    rig = Rig()
    # The quota controller charges pods when they are created: 3 pending pods of 16 CPUs
    # make used 48 of 64. Demand 48 + 2 × 16 = 80, within 64 - 48 + the 48 pending = 64.
    rig.capacities.upsert_quota(quota("tight", "q", {"requests.cpu": "64"}, {"requests.cpu": "48"}))
    for i in range(3):
        rig.cluster.upsert_pod(pod(f"t{i}", "tight", 16, selector={POOL: "cpu"}))
    hint = rig.hint("tight")
    # a1 (22 free) and a2 (32) take a 16-CPU pod: 54; 10 lacking, one cpu node.
    assert (hint.demand, hint.room, hint.gap, hint.nodes) == (
        {"cpu": 64000}, {"cpu": 54000}, {"cpu": 10000}, 1,
    )  # fmt: skip
