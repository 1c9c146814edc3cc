"""The drain planner, rule by rule, on live clusters fed Node, Pod and PDB objects as the
watches deliver them: each case has a node that would drain but for one rule."""

from __future__ import annotations

from typing import Any

from coordinator.config import DrainBudget, DrainSettings, EvictionSettings
from coordinator.consolidation.drain import DISRUPTED, DrainPlan, plan_drains
from coordinator.eviction.answers import Deadline
from coordinator.state.signals import NodeSignals
from tests.coordinator.consolidation.drainrig import pod
from tests.coordinator.eviction.evictrig import NOW, EvictRig, node, pdb

DRAIN = DrainSettings()


def plan(
    rig: EvictRig, *candidates: str, settings: DrainSettings = DRAIN, **evictions: Any
) -> DrainPlan:
    caps = EvictionSettings(**evictions) if evictions else rig.evictions
    return plan_drains(rig.view(), candidates, settings, caps, NOW)


def freed(result: DrainPlan) -> list[str]:
    return [d.node for d in result.drains]


def why(result: DrainPlan, name: str) -> str:
    return next(b.reason for b in result.blocked if b.node == name)


def cpu_nodes(*names: str, cpu: str = "16") -> list[dict[str, Any]]:
    return [node(n, cpu=cpu, memory="64Gi", gpus=0) for n in names]


def test_a_node_whose_pods_fit_elsewhere_drains_with_each_pods_destination() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    rig.pods(pod("a", node="n1", cpu="2"), pod("b", node="n1", cpu="3"), pod("c", node="n2"))
    result = plan(rig, "n1")
    assert freed(result) == ["n1"]
    (drain,) = result.drains
    assert {(m.pod, m.destination) for m in drain.moves} == {("ns/a", "n2"), ("ns/b", "n2")}
    assert drain.plan is not None
    assert drain.plan.trigger == "consolidation" and drain.plan.preemptor is None
    assert {v.name for v in drain.plan.victims} == {"a", "b"}


def test_a_pod_no_other_node_can_take_blocks_the_drain() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    rig.pods(pod("big", node="n1", cpu="10"), pod("full", node="n2", cpu="10"))
    result = plan(rig, "n1")
    assert freed(result) == []
    assert "ns/big fits on no other node" in why(result, "n1")


def test_kube_schedulers_filters_are_asked_too_a_node_selector_pins_the_pod() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    pinned = pod("pinned", node="n1")
    pinned["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n1"}
    rig.pods(pinned)
    result = plan(rig, "n1")
    assert freed(result) == []
    assert "NodeAffinity" in why(result, "n1")


def test_two_pods_competing_for_one_hole_do_not_both_count_on_it() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    # n2 has 6 CPUs free: either pod of n1 fits there alone, not both.
    rig.pods(pod("x", node="n1", cpu="4"), pod("y", node="n1", cpu="4"))
    rig.pods(pod("filler", node="n2", cpu="10"))
    result = plan(rig, "n1")
    assert freed(result) == []
    assert "fits on no other node" in why(result, "n1")


def test_two_drains_do_not_count_on_the_same_hole() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2", "n3"))
    rig.pods(pod("x", node="n1", cpu="4"), pod("y", node="n2", cpu="4"))
    rig.pods(pod("filler", node="n3", cpu="10"))  # 6 CPUs free: one of the two pods
    settings = DrainSettings(max_draining=5, budgets=())
    result = plan(rig, "n1", "n2", settings=settings)
    # most-allocated puts n1's pod on n3, the fuller node; n2's finds the hole taken
    # (and n1, drained in this plan, takes nothing).
    assert freed(result) == ["n1"]
    assert result.drains[0].moves[0].destination == "n3"
    assert "ns/y fits on no other node" in why(result, "n2")


def test_a_node_that_takes_pods_of_one_drain_is_not_drained_in_the_same_plan() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    rig.pods(pod("x", node="n1"), pod("y", node="n2"))
    result = plan(rig, "n1", "n2", settings=DrainSettings(max_draining=5, budgets=()))
    assert freed(result) == ["n1"]
    assert "takes pods moved off other nodes" in why(result, "n2")


def test_a_pdb_with_no_disruption_allowed_blocks_and_one_allowed_is_spent_once() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2", "n3", "n4"))
    rig.pods(
        pod("a", node="n1", labels={"app": "web"}),
        pod("b", node="n2", labels={"app": "web"}),
        pod("filler", node="n4", cpu="4"),  # the fullest: where both would go
    )
    settings = DrainSettings(max_draining=5, budgets=())
    rig.budgets(pdb("web", {"app": "web"}, allowed=0))
    result = plan(rig, "n1", settings=settings)
    assert freed(result) == []
    assert "PodDisruptionBudget(s) ns/web" in why(result, "n1")
    rig.budgets(pdb("web", {"app": "web"}, allowed=1))
    result = plan(rig, "n1", "n2", settings=settings)
    assert freed(result) == ["n1"]
    assert "ns/web" in why(result, "n2")


def test_a_gang_with_members_on_other_nodes_blocks_one_wholly_on_the_node_moves_whole() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2", "n3"))
    gang = {"scheduling.k8s.io/group-name": "job"}
    rig.pods(
        pod("m0", node="n1", annotations=gang),
        pod("m1", node="n2", annotations=gang),
    )
    result = plan(rig, "n1")
    assert freed(result) == []
    assert "gang ns/job would fall below minMember" in why(result, "n1")

    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    rig.pods(pod("m0", node="n1", annotations=gang), pod("m1", node="n1", annotations=gang))
    result = plan(rig, "n1")
    assert freed(result) == ["n1"]
    assert {m.pod for m in result.drains[0].moves} == {"ns/m0", "ns/m1"}


def test_a_pod_above_the_max_level_blocks() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    rig.pods(pod("vip", node="n1", priority=10_000))  # high
    result = plan(rig, "n1")
    assert freed(result) == []
    assert "ns/vip is high" in why(result, "n1")
    result = plan(rig, "n1", settings=DrainSettings(max_level="high"))
    assert freed(result) == ["n1"]


def test_a_level_label_cannot_raise_a_pod_above_the_max_level() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    rig.pods(pod("claims", node="n1", labels={"stowage.io/priority-level": "critical"}))
    assert freed(plan(rig, "n1")) == ["n1"]


def test_a_checkpointing_pod_blocks() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    rig.pods(pod("ckpt", node="n1", annotations={"stowage.io/checkpointing": "true"}))
    result = plan(rig, "n1")
    assert freed(result) == []
    assert "writing a checkpoint" in why(result, "n1")


def test_a_drain_larger_than_one_cycles_caps_is_not_planned() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    rig.pods(*(pod(f"p{k}", node="n1") for k in range(5)))
    result = plan(rig, "n1")  # max_per_node_per_cycle is 4
    assert freed(result) == []
    assert "exceed one cycle's caps" in why(result, "n1")
    result = plan(rig, "n1", max_per_node_per_cycle=5)
    assert freed(result) == ["n1"]


def test_at_most_max_draining_nodes_drain_and_those_draining_come_first() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2", "n3"))
    tainted = node("n2", cpu="16", memory="64Gi", gpus=0)
    tainted["spec"] = {"taints": [{"key": DISRUPTED, "effect": "NoSchedule"}]}
    rig.nodes(tainted)
    rig.pods(pod("a", node="n1"), pod("b", node="n2"), pod("filler", node="n3", cpu="4"))
    settings = DrainSettings(max_draining=1, budgets=())
    result = plan(rig, "n1", settings=settings)
    assert freed(result) == ["n2"]
    assert result.drains[0].draining
    assert "drain.max_draining" in why(result, "n1")
    # The tainted node takes no pod, though its own pod has left it in the plan.
    both = plan(rig, "n1", settings=DrainSettings(max_draining=2, budgets=()))
    assert freed(both) == ["n2", "n1"]
    assert {m.destination for d in both.drains for m in d.moves} == {"n3"}


def test_the_node_groups_budget_holds_per_group_and_a_window_can_close_it() -> None:
    def grouped(name: str, group: str) -> dict[str, Any]:
        obj = node(name, cpu="16", memory="64Gi", gpus=0)
        obj["metadata"]["labels"]["karpenter.sh/nodepool"] = group
        return obj

    rig = EvictRig().nodes(*(grouped(f"a{k}", "a") for k in range(3)), grouped("b0", "b"))
    rig.nodes(grouped("b1", "b"), grouped("c0", "c"))
    rig.pods(pod("x", node="a0"), pod("y", node="a1"), pod("z", node="b0"))
    rig.pods(pod("filler", node="c0", cpu="4"))  # the fullest: where every pod goes
    settings = DrainSettings(max_draining=10, budgets=(DrainBudget(nodes="1"),))
    result = plan(rig, "a0", "a1", "b0", settings=settings)
    assert freed(result) == ["a0", "b0"]
    assert "node group a lets 1 of its 3" in why(result, "a1")
    # NOW (1_790_000_000) is a Monday, 14:13 UTC: a window over it closes group b.
    closed = DrainBudget(nodes="0", days=("mon",), start="14:00", duration_h=1)
    settings = DrainSettings(max_draining=10, budgets=(), group_budgets={"b": (closed,)})
    result = plan(rig, "a0", "a1", "b0", settings=settings)
    assert freed(result) == ["a0", "a1"]
    assert "node group b lets 0" in why(result, "b0")


def test_daemonset_pods_stay_and_a_node_holding_only_them_is_already_empty() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    daemon = pod("agent", node="n1")
    daemon["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "agent",
            "uid": "ds",
            "controller": True,
        }
    ]
    daemon["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n1"}  # as a DaemonSet pins
    rig.pods(daemon)
    result = plan(rig, "n1")
    assert freed(result) == ["n1"]
    assert result.drains[0].moves == () and result.drains[0].plan is None


def test_gpu_pods_move_to_gpus_with_room_and_not_two_onto_one_free_gpu() -> None:
    rig = EvictRig().nodes(node("g1", gpus=2), node("g2", gpus=2))
    rig.pods(pod("t0", node="g1", gpus=1), pod("t1", node="g1", gpus=1))
    rig.pods(pod("busy", node="g2", gpus=1))  # g2 has one GPU free
    result = plan(rig, "g1")
    assert freed(result) == []
    assert "fits on no other node" in why(result, "g1")


def test_a_node_drained_already_counts_against_neither_max_draining_nor_the_budget() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n3"))
    emptied = node("n2", cpu="16", memory="64Gi", gpus=0)
    emptied["spec"] = {"taints": [{"key": DISRUPTED, "effect": "NoSchedule"}]}
    rig.nodes(emptied)
    rig.pods(pod("a", node="n1"), pod("filler", node="n3", cpu="4"))
    settings = DrainSettings(max_draining=1, budgets=(DrainBudget(nodes="1"),))
    result = plan(rig, "n1", settings=settings)
    assert freed(result) == ["n2", "n1"]
    assert result.drains[0].plan is None


def test_a_pod_placed_counts_for_kube_schedulers_filters_before_the_next_one() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    ported = []
    for name in ("p", "q"):
        obj = pod(name, node="n1")
        obj["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        ported.append(obj)
    rig.pods(*ported)  # Stowage's state has room for both on n2; NodePorts has one port
    result = plan(rig, "n1")
    assert freed(result) == []
    assert "NodePorts" in why(result, "n1")


def test_a_drain_that_fails_partway_gives_back_the_room_its_first_pods_took() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2", "n3"))
    # n1's big pod takes n3's room (n2 has too little), then its pinned pod fits nowhere:
    # n1 stays, and n2's pod, too big for what n1 has free, needs n3's room whole.
    pinned = pod("pinned", node="n1", cpu="1")
    pinned["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n1"}
    rig.pods(pod("big", node="n1", cpu="8"), pinned)
    rig.pods(pod("other", node="n2", cpu="9"), pod("filler", node="n3", cpu="6"))
    settings = DrainSettings(max_draining=5, budgets=())
    result = plan(rig, "n1", "n2", settings=settings)
    assert "ns/pinned fits on no other node" in why(result, "n1")
    assert freed(result) == ["n2"]
    assert result.drains[0].moves[0].destination == "n3"


def test_a_mirror_pod_stays_like_a_daemonset_pod() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    static = pod("etcd", node="n1", annotations={"kubernetes.io/config.mirror": "abc"})
    static["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n1"}
    rig.pods(static)
    assert [d.moves for d in plan(rig, "n1").drains] == [()]


def test_a_drain_under_way_goes_on_when_its_budget_closes() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n3"))
    tainted = node("n2", cpu="16", memory="64Gi", gpus=0)
    tainted["spec"] = {"taints": [{"key": DISRUPTED, "effect": "NoSchedule"}]}
    rig.nodes(tainted)
    rig.pods(pod("a", node="n1"), pod("b", node="n2"), pod("filler", node="n3", cpu="4"))
    shut = DrainSettings(max_draining=5, budgets=(DrainBudget(nodes="0"),))
    result = plan(rig, "n1", settings=shut)
    # Half a drain left behind is the worst outcome: the one under way finishes; no new one.
    assert freed(result) == ["n2"]
    assert "lets 0 of its 3" in why(result, "n1")


def test_a_node_whose_live_signals_refuse_the_pod_is_no_destination() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    rig.pods(pod("batch", node="n1", annotations={"stowage.io/qos": "batch"}))
    state = rig.cluster.state
    assert state is not None
    hot = NodeSignals(measured_at=NOW, cpu_used_pct=99.0)  # kube-scheduler would not know
    rig.cluster.signals["n2"] = hot
    state.set_signals(state.index["n2"], hot)
    result = plan(rig, "n1")
    assert freed(result) == []
    assert "Stowage's filter refuses it everywhere" in why(result, "n1")


def test_a_node_the_plan_frees_empty_takes_no_pod_of_a_later_drain() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2", "n3"))
    rig.pods(pod("x", node="n2", cpu="2"), pod("filler", node="n3", cpu="15"))
    result = plan(rig, "n1", "n2", settings=DrainSettings(max_draining=5, budgets=()))
    assert freed(result) == ["n1"]  # x's only room is on n1, which the plan frees
    assert "ns/x fits on no other node" in why(result, "n2")


def test_past_the_deadline_nothing_more_is_planned_and_no_drain_is_half_placed() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2", "n3"))
    rig.pods(pod("x", node="n1"), pod("y", node="n1"), pod("z", node="n2"))
    rig.pods(pod("filler", node="n3", cpu="4"))
    looks = iter(range(100))
    deadline = Deadline(lambda: float(next(looks)), until=2.0)  # passed at the third look
    settings = DrainSettings(max_draining=5, budgets=())
    result = plan_drains(rig.view(), ["n1", "n2"], settings, rig.evictions, NOW, deadline)
    # Looks: before n1, before x, before y (passed): n1 is given up whole, n2 not reached.
    assert result.cut and freed(result) == []
    assert [b.reason for b in result.blocked] == ["not planned before the planning deadline"] * 2


def test_a_pod_without_a_controller_blocks_evicting_it_would_end_it() -> None:
    rig = EvictRig().nodes(*cpu_nodes("n1", "n2"))
    bare = pod("bare", node="n1")
    del bare["metadata"]["ownerReferences"]
    rig.pods(bare)
    result = plan(rig, "n1")
    assert freed(result) == []
    assert "ns/bare has no controller" in why(result, "n1")
