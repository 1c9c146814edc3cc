"""The migration planner, rule by rule, on live clusters fed Node, Pod and PDB objects as
the watches deliver them: each case has a pending multi-GPU pod that a migration would
place but for one rule."""

from __future__ import annotations

import dataclasses
from typing import Any

from coordinator.config import DefragSettings, EvictionSettings
from coordinator.consolidation.defrag import Migration, choose, plan_migration
from coordinator.eviction.answers import Deadline, Refusal
from tests.coordinator.consolidation.drainrig import pod
from tests.coordinator.eviction.evictrig import NOW, EvictRig, node, pdb, roomy_caps

DEFRAG = DefragSettings()
MEDIUM = 1_000
HIGH = 10_000


def gpu_nodes(*names: str, gpus: int = 8) -> list[dict[str, Any]]:
    return [node(n, cpu="64", memory="512Gi", gpus=gpus) for n in names]


def pending(gpus: int = 8, priority: int = MEDIUM, **fields: Any) -> dict[str, Any]:
    return pod("big", gpus=gpus, priority=priority, **fields)


def small(name: str, where: str, gpus: int = 1, **fields: Any) -> dict[str, Any]:
    return pod(name, node=where, gpus=gpus, priority=fields.pop("priority", MEDIUM), **fields)


def migrate(
    rig: EvictRig,
    obj: dict[str, Any],
    settings: DefragSettings = DEFRAG,
    evictions: EvictionSettings | None = None,
    **kw: Any,
) -> Migration | Refusal:
    rig.pods(obj)
    return plan_migration(
        rig.view(), rig.facts(obj), settings, evictions or rig.evictions, NOW, **kw
    )


def moved(answer: Migration | Refusal) -> set[tuple[str, str]]:
    assert isinstance(answer, Migration), answer
    return {(m.pod, m.destination) for m in answer.moves}


def test_one_small_pod_moves_to_the_node_with_room_and_the_big_pod_takes_its_node() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1"), small("b", "n1"), small("c", "n2"))
    answer = migrate(rig, pending())
    assert moved(answer) == {("ns/c", "n1")}
    assert isinstance(answer, Migration)
    assert answer.node == "n2" and answer.pod == "ns/big"
    plan = answer.plan
    assert plan.trigger == "defrag" and plan.node == "n2"
    assert plan.preemptor == "ns/big" and plan.preemptor_uid == "uid-ns-big"
    (victim,) = plan.victims
    assert victim.name == "c" and victim.reason.startswith("moves to n1: moved to make room")
    assert "ns/c to n1" in plan.reason and not plan.cut


def test_the_fewest_pods_move() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    # n1: two one-GPU pods (6 free); n2: one two-GPU pod (6 free). Moving c moves one.
    rig.pods(small("a", "n1"), small("b", "n1"), small("c", "n2", gpus=2))
    assert moved(migrate(rig, pending())) == {("ns/c", "n1")}


def test_a_pod_that_just_checkpointed_moves_before_one_that_did_not() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2", "n3"))
    recent = {"stowage.io/last-checkpoint": str(NOW - 60)}
    old = {"stowage.io/last-checkpoint": str(NOW - 7_200)}
    rig.pods(small("stale", "n1", annotations=old), small("fresh", "n2", annotations=recent))
    rig.pods(*(small(f"f{k}", "n3") for k in range(4)))  # n3: 4 free, room for either
    answer = migrate(rig, pending())
    assert moved(answer) == {("ns/fresh", "n3")}
    assert isinstance(answer, Migration) and answer.node == "n2"


def test_no_pod_above_the_pending_pods_level_moves() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1"), small("c", "n2", priority=MEDIUM))
    answer = migrate(rig, pending(priority=0))  # low: may move only low pods
    assert isinstance(answer, Refusal)
    assert "at or below low" in answer.reason


def test_no_pod_above_defrag_max_level_moves_whatever_the_pending_pods_level() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1", priority=HIGH), small("c", "n2", priority=HIGH))
    assert isinstance(migrate(rig, pending(priority=HIGH)), Refusal)
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1", priority=HIGH), small("c", "n2", priority=HIGH))
    high = DefragSettings(max_level="high")
    assert moved(migrate(rig, pending(priority=HIGH), high)) in (
        {("ns/a", "n2")},
        {("ns/c", "n1")},
    )


def test_a_pod_without_a_controller_is_not_moved() -> None:
    from tests.coordinator.eviction import evictrig

    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    bare = evictrig.pod("c", node="n2", gpus=1, priority=MEDIUM)
    rig.pods(small("a", "n1"), small("b", "n1"), bare)
    # Only n1's pods are movable: both must go, and n2 has room for them.
    assert moved(migrate(rig, pending())) == {("ns/a", "n2"), ("ns/b", "n2")}


def test_a_daemonset_pod_is_not_moved() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    daemon = small("c", "n2")
    daemon["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-uid",
         "controller": True}
    ]  # fmt: skip
    rig.pods(small("a", "n1"), small("b", "n1"), daemon)
    assert moved(migrate(rig, pending())) == {("ns/a", "n2"), ("ns/b", "n2")}


def test_a_pod_writing_a_checkpoint_is_not_moved() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    writing = {"stowage.io/checkpointing": "true"}
    rig.pods(small("a", "n1"), small("b", "n1"), small("c", "n2", annotations=writing))
    assert moved(migrate(rig, pending())) == {("ns/a", "n2"), ("ns/b", "n2")}


def test_a_pod_as_large_as_the_pending_one_is_not_moved() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1", gpus=4), small("c", "n2", gpus=4))
    answer = migrate(rig, pending(gpus=4))
    assert isinstance(answer, Refusal) and "fits on" in answer.reason  # 4 free on each
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1", gpus=5), small("c", "n2", gpus=5))
    assert isinstance(migrate(rig, pending(gpus=5)), Refusal)


def test_a_pod_as_large_as_the_pending_one_only_moves_the_hole_and_stays() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    # big may run on n1 only; a (as large as big) could move to n2, which has 4 free.
    rig.pods(small("a", "n1", gpus=4), small("h", "n1", gpus=2, priority=HIGH))
    rig.pods(small("g", "n2", gpus=4, priority=HIGH))
    obj = pending(gpus=4)
    obj["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n1"}
    answer = migrate(rig, obj)
    assert isinstance(answer, Refusal), answer


def test_no_pod_moves_to_a_node_an_earlier_plan_of_the_round_promised() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2", "n3"))
    rig.pods(small("a", "n1"))
    rig.pods(*(small(f"h{k}", "n2", priority=HIGH) for k in range(2)))  # n2: 6 free
    rig.pods(*(small(f"j{k}", "n3", priority=HIGH) for k in range(2)))  # n3: 6 free
    obj = pending()
    rig.pods(obj)
    view = rig.view()
    assert moved(plan_migration(view, rig.facts(obj), DEFRAG, rig.evictions, NOW)) == {
        ("ns/a", "n2")  # the policy's tie goes by name
    }
    promised = dataclasses.replace(view, promised=frozenset({"n2"}))
    answer = plan_migration(promised, rig.facts(obj), DEFRAG, rig.evictions, NOW)
    assert moved(answer) == {("ns/a", "n3")}


def test_a_budget_allowing_no_disruption_keeps_its_pods() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1"), small("b", "n1"), small("c", "n2", labels={"app": "c"}))
    rig.budgets(pdb("keep-c", {"app": "c"}, allowed=0))
    assert moved(migrate(rig, pending())) == {("ns/a", "n2"), ("ns/b", "n2")}


def test_two_moves_never_count_on_the_same_room() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    # n1's two pods must both move; n2 has room for one of them only.
    rig.pods(small("a", "n1"), small("b", "n1"))
    rig.pods(*(small(f"f{k}", "n2") for k in range(7)))
    answer = migrate(rig, pending())
    assert isinstance(answer, Refusal), answer


def test_the_moved_pods_are_placed_by_backtracking_where_greedy_would_fail() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2", "n3"))
    # Moving a (2 GPUs) and b (2 GPUs) off n1: n2 has 3 free, n3 has 2 free. The policy's
    # best node for the first pod may be either; only a to n2 and b to n3 (or the other
    # way round, each to a node with room) fits both.
    rig.pods(small("a", "n1", gpus=2), small("b", "n1", gpus=2))
    rig.pods(small("x", "n2", gpus=4), small("y", "n2", gpus=1))
    rig.pods(small("z", "n3", gpus=6, priority=HIGH))
    answer = migrate(rig, pending())
    destinations = sorted(d for _, d in moved(answer))
    assert destinations == ["n2", "n3"]


def test_a_gang_moves_whole_and_counts_every_member() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2", "n3"))
    gang = {"scheduling.k8s.io/group-name": "g", "stowage.io/gang-min-member": "2"}
    rig.pods(small("g1", "n1", annotations=gang), small("g2", "n2", annotations=gang))
    rig.pods(small("a", "n1"), small("b", "n1"))  # n1: 5 free; n2: 7 free; n3: 8 free
    rig.pods(*(small(f"f{k}", "n3", priority=HIGH) for k in range(2)))  # n3: 6 free
    # Making n2 room: g2 moves, dragging g1 along (two moves); making n1 room: three.
    answer = migrate(rig, pending())
    assert moved(answer) == {("ns/g2", "n3"), ("ns/g1", "n3")}
    assert isinstance(answer, Migration) and answer.node == "n2"
    assert answer.plan.cost[3] == 1  # one gang member dragged along
    assert isinstance(migrate(rig, pending(), DefragSettings(max_moves=1)), Refusal)


def test_the_caps_of_one_cycle_bound_the_migration() -> None:
    rig = EvictRig(settings=roomy_caps(max_per_node_per_cycle=1)).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1"), small("b", "n1"), small("c", "n2", gpus=2), small("d", "n2"))
    answer = migrate(rig, pending())
    assert isinstance(answer, Refusal), answer


def test_a_pod_that_fits_already_or_asks_few_gpus_gets_no_migration() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1"))
    answer = migrate(rig, pending(gpus=8))
    assert isinstance(answer, Refusal) and "fits on n2 without moving anyone" in answer.reason
    answer = migrate(rig, pod("one", gpus=1, priority=MEDIUM))
    assert isinstance(answer, Refusal) and "defrag.min_gpus" in answer.reason


def test_a_pod_kube_scheduler_would_not_place_there_gets_no_migration_there() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1"), small("b", "n1"), small("c", "n2"))
    obj = pending()
    obj["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n1"}
    # n2 is out: only n1's two pods may make room, and n2 takes both.
    assert moved(migrate(rig, obj)) == {("ns/a", "n2"), ("ns/b", "n2")}


def test_preemption_is_left_to_the_eviction_cycle_when_it_evicts_no_more() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1"), small("b", "n1"), small("c", "n2", priority=0))
    obj = pending(priority=HIGH)  # high: may preempt the low pod c, one eviction
    rig.pods(obj)
    view, facts = rig.view(), rig.facts(obj)
    answer = choose(view, facts, DEFRAG, rig.evictions, NOW)
    assert isinstance(answer, Refusal) and "the eviction cycle preempts" in answer.reason
    medium = pending(priority=MEDIUM)  # medium: preempts no one, migrates c
    medium["metadata"].update(name="mid", uid="uid-mid")
    rig.pods(medium)
    answer = choose(rig.view(), rig.facts(medium), DEFRAG, rig.evictions, NOW)
    assert moved(answer) == {("ns/c", "n1")}


def test_the_search_is_bounded_whatever_the_clock_says() -> None:
    # The largest report the schema admits: 64 GPUs a node, a pod on each; an 8-GPU pod
    # needs any 8 of them moved (C(64, 8) sets), and no other node has room for any.
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2", gpus=64))
    rig.pods(*(small(f"a{k}", "n1") for k in range(64)))
    rig.pods(*(small(f"b{k}", "n2", priority=HIGH) for k in range(64)))
    still = Deadline(lambda: 0.0, 1.0)  # a clock standing still never passes it
    answer = migrate(rig, pending(), DefragSettings(max_moves=8), deadline=still)
    assert isinstance(answer, Refusal) and "cut" in answer.reason


def test_a_deadline_passed_cuts_the_search() -> None:
    rig = EvictRig(settings=roomy_caps()).nodes(*gpu_nodes("n1", "n2"))
    rig.pods(small("a", "n1"), small("b", "n1"), small("c", "n2"))
    passed = Deadline(lambda: 2.0, 1.0)
    answer = migrate(rig, pending(), deadline=passed)
    assert isinstance(answer, Refusal) and "cut" in answer.reason


def test_the_pending_pod_is_judged_again_with_the_moved_pods_in_their_new_places() -> None:
    rig = EvictRig(settings=roomy_caps())
    rig.nodes(_zoned("n1", "a"), _zoned("n2", "a"), _zoned("n3", "b"))
    # c (app=x) must leave n2 for big, which keeps app=x out of its zone: n1, the policy's
    # first choice (fuller), is in big's zone; only n3 (zone b) will do.
    rig.pods(*(small(f"h{k}", "n1", priority=HIGH) for k in range(6)))
    rig.pods(small("c", "n2", labels={"app": "x"}), small("h", "n3", priority=HIGH))
    obj = pending()
    obj["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "topologyKey": "topology.kubernetes.io/zone",
                }
            ]
        }
    }
    assert moved(migrate(rig, obj)) == {("ns/c", "n3")}


def _zoned(name: str, zone: str) -> dict[str, Any]:
    obj = node(name, cpu="64", memory="512Gi", gpus=8)
    obj["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
    return obj
