"""The eviction planner's rules, one scenario each: every test here fails when its rule
is taken out of :mod:`coordinator.eviction.plan`."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from coordinator.config import CoordinatorSettings, EvictionSettings, PolicySettings
from coordinator.eviction.answers import Deadline, Level, Plan, Refusal, level_of
from coordinator.eviction.plan import narrow_victims, plan_pressure
from coordinator.eviction.plan import plan_preemption as plan
from coordinator.eviction.view import given_back
from coordinator.live.decisions import judge
from coordinator.state.podfacts import budget_of
from coordinator.state.signals import NodeSignals
from tests.coordinator.eviction.evictrig import (
    H100,
    NOW,
    EvictRig,
    node,
    pdb,
    pod,
    podgroup,
    roomy_caps,
)

HIGH = 10_000
MEDIUM = 1_000
CRITICAL = 2_000_000_000


def pending(priority: int = HIGH, gpus: int = 8, **kw: object) -> dict:
    return pod("want", gpus=gpus, priority=priority, **kw)  # type: ignore[arg-type]


def names(result: Plan | Refusal) -> list[str]:
    assert isinstance(result, Plan), result
    return sorted(v.name for v in result.victims)


def rig_with(*objs: dict, nodes: tuple[str, ...] = ("gpu-a", "gpu-b")) -> EvictRig:
    return EvictRig().nodes(*(node(n) for n in nodes)).pods(*objs)


# ------------------------------------------------------------------------ levels


def test_levels_come_from_priority_values_and_the_label_only_lowers_them() -> None:
    rig = EvictRig()
    settings = rig.evictions
    assert level_of(rig.facts(pod("x", priority=0)), settings) == Level.LOW
    assert level_of(rig.facts(pod("x", priority=MEDIUM)), settings) == Level.MEDIUM
    assert level_of(rig.facts(pod("x", priority=HIGH)), settings) == Level.HIGH
    assert level_of(rig.facts(pod("x", priority=CRITICAL)), settings) == Level.CRITICAL
    marked = pod("x", priority=CRITICAL, labels={"stowage.io/priority-level": "Low"})
    assert level_of(rig.facts(marked), settings) == Level.LOW
    for priority, mark, level in (
        (0, "critical", Level.LOW),
        (MEDIUM, "high", Level.MEDIUM),
        (HIGH, "critical", Level.HIGH),
        (HIGH, "medium", Level.MEDIUM),
    ):
        as_label = pod("x", priority=priority, labels={"stowage.io/priority-level": mark})
        as_note = pod("x", priority=priority, annotations={"stowage.io/priority-level": mark})
        assert level_of(rig.facts(as_label), settings) == level, (priority, mark)
        assert level_of(rig.facts(as_note), settings) == level, (priority, mark)


def test_a_priority_0_pod_labelled_critical_displaces_no_one() -> None:
    """Self-promotion: its owner writes the label; its PriorityClass says low."""
    rig = rig_with(pod("theirs", node="gpu-a", gpus=8, namespace="team-b"), nodes=("gpu-a",))
    promoted = pending(0, namespace="team-a", labels={"stowage.io/priority-level": "critical"})
    refused = plan(rig.view(), rig.facts(promoted), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert refused.reason.startswith("team-a/want is low")


def test_two_level_rule_a_high_pod_displaces_low_pods_only() -> None:
    rig = rig_with(
        pod("low", node="gpu-a", gpus=4),
        pod("medium", node="gpu-a", gpus=4, priority=MEDIUM),
        pod("busy", node="gpu-b", gpus=8, priority=MEDIUM),
    )
    refused = plan(rig.view(), rig.facts(pending(HIGH)), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "would still not fit after evicting every allowed pod" in refused.reason
    # a critical pod may displace medium ones: the cheaper node (two medium-or-lower pods
    # sum to fewer levels than... the single medium pod on gpu-b is one victim)
    chosen = plan(rig.view(), rig.facts(pending(CRITICAL)), rig.evictions, NOW)
    assert isinstance(chosen, Plan)
    assert (chosen.node, names(chosen)) == ("gpu-b", ["busy"])


def test_medium_pods_displace_no_one() -> None:
    rig = rig_with(pod("low", node="gpu-a", gpus=8), nodes=("gpu-a",))
    refused = plan(rig.view(), rig.facts(pending(MEDIUM)), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "may displace only pods 2 levels below" in refused.reason


# ----------------------------------------------------------- the smallest set


def test_the_plan_takes_the_fewest_victims_anywhere() -> None:
    rig = rig_with(
        *(pod(f"one-{k}", node="gpu-a", gpus=1) for k in range(8)),
        pod("four-1", node="gpu-b", gpus=4),
        pod("four-2", node="gpu-b", gpus=4),
    )
    chosen = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(chosen, Plan)
    assert (chosen.node, names(chosen)) == ("gpu-b", ["four-1", "four-2"])
    assert chosen.cost[:2] == (2.0, 2.0)
    assert chosen.trigger == "preemption" and chosen.preemptor == "ns/want"


def test_pods_that_free_nothing_needed_are_not_taken() -> None:
    rig = rig_with(
        pod("gpus", node="gpu-a", gpus=8, cpu="1"),
        pod("cpu", node="gpu-a", cpu="8"),
        nodes=("gpu-a",),
    )
    chosen = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert names(chosen) == ["gpus"]


def test_a_pod_that_fits_already_gets_no_plan() -> None:
    rig = rig_with(pod("low", node="gpu-a", gpus=4))
    refused = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "fits on gpu-b without evicting anyone" in refused.reason


# ---------------------------------------------------------------- checkpoints


def checkpointed(name: str, where: str, seconds_ago: float, **annotations: str) -> dict:
    stamp = {"stowage.io/last-checkpoint": str(NOW - seconds_ago), **annotations}
    return pod(name, node=where, gpus=8, annotations=stamp)


def test_victims_with_a_recent_checkpoint_are_preferred() -> None:
    rig = rig_with(checkpointed("old", "gpu-a", 3600), checkpointed("fresh", "gpu-b", 60))
    chosen = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert names(chosen) == ["fresh"]
    assert isinstance(chosen, Plan)
    assert chosen.victims[0].checkpoint_age_s == pytest.approx(60)
    assert "last checkpoint 60 s ago" in chosen.victims[0].reason


def test_volcano_checkpoint_time_counts_too() -> None:
    volcano = {"volcano.sh/last-checkpoint-time": "2026-09-21T12:00:00Z"}
    rig = EvictRig()
    facts = rig.facts(pod("v", node="gpu-a", annotations=volcano))
    assert facts.checkpoint_at == pytest.approx(1_789_992_000.0)


def test_a_pod_checkpointing_now_is_not_a_victim() -> None:
    rig = rig_with(
        checkpointed("writing", "gpu-a", 10, **{"stowage.io/checkpointing": "true"}),
        checkpointed("old", "gpu-b", 7200),
    )
    chosen = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert names(chosen) == ["old"]


def claiming(checkpoint_at: float, claim: bool = True) -> dict:
    """The one pod on gpu-a, its last checkpoint at ``checkpoint_at``, claiming or not."""
    notes = {"stowage.io/last-checkpoint": str(checkpoint_at)}
    if claim:
        notes["stowage.io/checkpointing"] = "true"
    return pod("writing", node="gpu-a", gpus=8, annotations=notes)


def shielded(rig: EvictRig) -> bool:
    """Whether the pending pod gets no plan (the claiming pod is all there is to evict)."""
    result = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    if isinstance(result, Refusal):
        return True
    assert names(result) == ["writing"]
    return False


def test_a_checkpointing_claim_shields_for_checkpointing_max_s_only() -> None:
    """A claim whose last checkpoint stands still stops shielding."""
    rig = rig_with(claiming(NOW - 10), nodes=("gpu-a",))
    rig.clock.advance(299)
    rig.pods(claiming(NOW - 10))  # an update that moves nothing
    assert shielded(rig)
    rig.clock.advance(1)
    assert not shielded(rig)


def test_the_claim_lasts_while_the_last_checkpoint_moves() -> None:
    rig = rig_with(claiming(NOW - 10), nodes=("gpu-a",))
    for step in range(1, 4):
        rig.clock.advance(200)
        rig.pods(claiming(NOW - 10 + step * 200))
        assert shielded(rig)
    rig.clock.advance(100)
    rig.cluster.replace_pods([claiming(NOW - 10 + 3 * 200)])  # a relist keeps the history
    assert shielded(rig)
    rig.clock.advance(100)
    rig.pods(claiming(NOW - 600))  # an older checkpoint is no move
    assert shielded(rig)
    rig.clock.advance(100)
    assert not shielded(rig)


def test_taking_the_claim_off_and_back_starts_nothing_afresh() -> None:
    rig = rig_with(claiming(NOW - 10), nodes=("gpu-a",))
    rig.clock.advance(200)
    rig.pods(claiming(NOW - 10, claim=False))
    assert not shielded(rig)
    rig.clock.advance(50)
    rig.pods(claiming(NOW - 10))
    assert shielded(rig)
    rig.clock.advance(50)
    rig.cluster.replace_pods([claiming(NOW - 10)])  # a relist keeps the history too
    assert not shielded(rig)


def test_a_claim_counts_for_the_configured_time() -> None:
    settings = CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"),
        evictions=EvictionSettings(checkpointing_max_s=30),
    )
    rig = EvictRig(settings=settings).nodes(node("gpu-a")).pods(claiming(NOW - 10))
    rig.clock.advance(29)
    assert shielded(rig)
    rig.clock.advance(1)
    assert not shielded(rig)
    rig.cluster.remove_pod(claiming(NOW - 10))
    rig.pods(claiming(NOW - 10))  # the same uid back: a pod deleted is forgotten
    assert shielded(rig)


# ------------------------------------------------------------------------ PDBs


def test_a_budget_with_no_disruption_left_protects_its_pods() -> None:
    rig = rig_with(
        pod("guarded", node="gpu-a", gpus=8, labels={"app": "infer"}),
        pod("spare-1", node="gpu-b", gpus=4),
        pod("spare-2", node="gpu-b", gpus=4),
    ).budgets(pdb("infer", {"app": "infer"}, allowed=0))
    chosen = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert names(chosen) == ["spare-1", "spare-2"]


def test_a_budget_is_not_overdrawn_by_one_plan() -> None:
    labels = {"app": "infer"}
    rig = rig_with(
        pod("i-1", node="gpu-a", gpus=4, labels=labels),
        pod("i-2", node="gpu-a", gpus=4, labels=labels),
        nodes=("gpu-a",),
    ).budgets(pdb("infer", labels, allowed=1))
    refused = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    rig.budgets(pdb("infer", labels, allowed=2))
    assert names(plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)) == ["i-1", "i-2"]


def test_a_pod_under_two_budgets_is_never_a_victim() -> None:
    """The Eviction API answers 500 for it."""
    rig = rig_with(
        pod("double", node="gpu-a", gpus=8, labels={"app": "x", "tier": "y"}),
        nodes=("gpu-a",),
    ).budgets(pdb("by-app", {"app": "x"}, allowed=5), pdb("by-tier", {"tier": "y"}, allowed=5))
    assert isinstance(plan(rig.view(), rig.facts(pending()), rig.evictions, NOW), Refusal)


def test_nothing_is_planned_before_the_budgets_are_listed() -> None:
    rig = rig_with(pod("low", node="gpu-a", gpus=8), nodes=("gpu-a",))
    rig.cluster.budgets.synced = False
    refused = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "PodDisruptionBudgets not listed yet" in refused.reason


# ----------------------------------------------------------------------- gangs


def member(name: str, where: str, gpus: int, group: str = "job", least: int | None = None):
    notes = {"scheduling.k8s.io/group-name": group}
    if least is not None:
        notes["stowage.io/gang-min-member"] = str(least)
    return pod(name, node=where, gpus=gpus, annotations=notes)


def test_breaking_a_gang_costs_the_whole_gang() -> None:
    rig = rig_with(
        member("g-0", "gpu-a", 8),
        member("g-1", "gpu-c", 1),
        member("g-2", "gpu-c", 1),
        pod("four-1", node="gpu-b", gpus=4),
        pod("four-2", node="gpu-b", gpus=4),
        nodes=("gpu-a", "gpu-b", "gpu-c"),
    )
    chosen = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert names(chosen) == ["four-1", "four-2"]  # 2 victims, not the gang's 3
    rig.cluster.remove_pod(pod("four-1", node="gpu-b"))
    rig.pods(pod("medium", node="gpu-b", gpus=4, priority=MEDIUM))
    dragged = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(dragged, Plan)
    assert names(dragged) == ["g-0", "g-1", "g-2"]
    # cheapest: free gpu-c by its two members, dragging the third along from gpu-a
    assert (dragged.node, dragged.cost) == ("gpu-c", (3.0, 3.0, 3 * 86_400.0, 1.0))
    by_name = {v.name: v for v in dragged.victims}
    assert by_name["g-0"].node == "gpu-a" and by_name["g-0"].gang == "ns/job"
    assert "would fall below minMember" in by_name["g-0"].reason
    assert "makes room for ns/want" in by_name["g-1"].reason


def test_a_gang_above_its_min_member_loses_one_member_only() -> None:
    rig = rig_with(
        member("g-0", "gpu-a", 8, least=2),
        member("g-1", "gpu-c", 1, least=2),
        member("g-2", "gpu-c", 1, least=2),
        nodes=("gpu-a", "gpu-c"),
    )
    rig.pods(pod("filler", node="gpu-c", gpus=6, priority=MEDIUM))
    assert names(plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)) == ["g-0"]


# -------------------------------------------------------------- wasted victims


def test_no_victims_where_stowage_filter_would_still_refuse() -> None:
    """Contiguous memory is short on the node: evicting frees GPUs but not contiguity,
    and the filter would go on refusing the pod there."""
    rig = rig_with(pod("low", node="gpu-a", gpus=8), nodes=("gpu-a",))
    state = rig.cluster.state
    assert state is not None
    short = NodeSignals(measured_at=NOW, contiguous_2mib_b=2**20)
    rig.cluster.signals["gpu-a"] = short
    state.set_signals(0, short)
    wants = pending(annotations={"stowage.io/needs-contiguous-memory": "1Gi"})
    refused = plan(rig.view(), rig.facts(wants), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "would still not fit" in refused.reason


def test_nodes_the_pod_could_never_use_are_not_planned_on() -> None:
    rig = rig_with(pod("low", node="gpu-a", gpus=8), nodes=("gpu-a",))
    wants = pending(annotations={"stowage.io/gpu-models": H100})
    refused = plan(rig.view(), rig.facts(wants), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "even empty" in refused.reason and "not one of" in refused.reason


# --------------------------------------------------------- cooldown, approval


def test_a_queue_cooling_down_gets_no_round() -> None:
    rig = rig_with(pod("low", node="gpu-a", gpus=8), nodes=("gpu-a",))
    cooling = rig.view(cooldown_until={"ns": NOW + 120})
    refused = plan(cooling, rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "ns is cooling down after its last round" in refused.reason
    cooled = rig.view(cooldown_until={"ns": NOW - 1})
    assert names(plan(cooled, rig.facts(pending()), rig.evictions, NOW)) == ["low"]


GANG = "scheduling.k8s.io/group-name"


def weighted(**weights: int) -> EvictRig:
    settings = CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"),
        evictions=EvictionSettings(queue_weights=weights),
    )
    return EvictRig(settings=settings).nodes(node("gpu-a")).pods(pod("low", node="gpu-a", gpus=8))


def test_a_queue_the_pod_names_itself_counts_for_nothing() -> None:
    """Queue dodging: a made-up queue would have neither approval nor a cooldown."""
    rig = weighted(ns=80)
    wants = pending(
        annotations={"scheduling.volcano.sh/queue-name": "made-up"},
        labels={"volcano.sh/queue-name": "made-up"},
    )
    chosen = plan(rig.view(), rig.facts(wants), rig.evictions, NOW)
    assert isinstance(chosen, Plan)
    assert (chosen.queue, chosen.needs_approval) == ("ns", True)
    assert chosen.victims[0].queue == "ns"
    refused = plan(rig.view({"ns": NOW + 100}), rig.facts(wants), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "queue ns is cooling down" in refused.reason


def test_the_queue_is_the_pod_s_podgroup_s() -> None:
    rig = weighted(research=80).podgroups(podgroup("job", "research"), podgroup("plain", None))
    wants = pending(annotations={GANG: "job", "scheduling.volcano.sh/queue-name": "made-up"})
    chosen = plan(rig.view({"ns": NOW + 100}), rig.facts(wants), rig.evictions, NOW)
    assert isinstance(chosen, Plan)
    assert (chosen.queue, chosen.needs_approval) == ("research", True)
    refused = plan(rig.view({"research": NOW + 100}), rig.facts(wants), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "queue research is cooling down" in refused.reason
    # A PodGroup without spec.queue is in Volcano's default queue.
    plain = plan(rig.view(), rig.facts(pending(annotations={GANG: "plain"})), rig.evictions, NOW)
    assert isinstance(plain, Plan) and plain.queue == "default"
    # The same name in another namespace is another PodGroup.
    rig.podgroups(podgroup("job", "research", namespace="elsewhere"))
    assert rig.cluster.podgroups.queues().of(rig.facts(wants)) is None


def test_a_victim_s_queue_is_its_podgroup_s_too() -> None:
    rig = rig_with(
        pod(
            "in-job", node="gpu-a", gpus=8, annotations={GANG: "old", "volcano.sh/queue-name": "x"}
        ),
        nodes=("gpu-a",),
    ).podgroups(podgroup("old", "batch"))
    chosen = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(chosen, Plan)
    assert [(v.name, v.queue) for v in chosen.victims] == [("in-job", "batch")]


def test_until_its_podgroup_is_known_the_strictest_queue_of_its_namespace_rules() -> None:
    rig = weighted(batch=10, research=80, theirs=100).podgroups(
        podgroup("a", "batch"),
        podgroup("b", "research"),
        podgroup("c", "theirs", namespace="elsewhere"),  # not a queue ns's pods use
    )
    unknown = pending(annotations={GANG: "not-there"})
    chosen = plan(rig.view(), rig.facts(unknown), rig.evictions, NOW)
    assert isinstance(chosen, Plan)
    assert (chosen.queue, chosen.needs_approval) == ("research", True)
    # A queue cooling down is stricter still: it allows no round at all.
    refused = plan(rig.view({"batch": NOW + 50}), rig.facts(unknown), rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "queue batch is cooling down after its last round" in refused.reason
    # With no PodGroups known (none listed yet, or Volcano not installed): the namespace.
    rig.podgroups()
    alone = plan(rig.view(), rig.facts(unknown), rig.evictions, NOW)
    assert isinstance(alone, Plan) and (alone.queue, alone.needs_approval) == ("ns", False)


@pytest.mark.parametrize(("weight", "needed"), [(50, False), (51, True)])
def test_heavy_queues_need_approval(weight: int, needed: bool) -> None:
    settings = CoordinatorSettings(
        policy=PolicySettings(name="most-allocated"),
        evictions=EvictionSettings(queue_weights={"ns": weight}),
    )
    rig = EvictRig(settings=settings).nodes(node("gpu-a")).pods(pod("low", node="gpu-a", gpus=8))
    chosen = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert isinstance(chosen, Plan) and chosen.needs_approval is needed


# --------------------------------------------------------------------- pressure


def best_effort(name: str, memory: str, priority: int = 0) -> dict:
    return pod(
        name,
        node="gpu-a",
        memory=memory,
        priority=priority,
        annotations={"stowage.io/qos": "best-effort"},
    )


def test_pressure_evicts_the_lowest_level_then_the_largest_best_effort_pod() -> None:
    rig = rig_with(
        best_effort("small", "1Gi"),
        best_effort("large", "8Gi"),
        best_effort("medium-level", "32Gi", priority=MEDIUM),
        pod("serving", node="gpu-a", memory="64Gi"),
        nodes=("gpu-a",),
    )
    rig.cluster.signals["gpu-a"] = NodeSignals(measured_at=NOW)
    chosen = plan_pressure(rig.view(), "gpu-a", rig.evictions, NOW)
    assert isinstance(chosen, Plan)
    assert (chosen.trigger, chosen.queue, names(chosen)) == ("pressure", "gpu-a", ["large"])


def test_pressure_never_evicts_on_a_stale_or_missing_report() -> None:
    rig = rig_with(best_effort("be", "8Gi"), nodes=("gpu-a",))
    refused = plan_pressure(rig.view(), "gpu-a", rig.evictions, NOW)
    assert isinstance(refused, Refusal)
    assert "no fresh report" in refused.reason


# ------------------------------------------------------------------ what-if state


def test_what_if_rows_judge_as_the_live_nodes_do() -> None:
    """With nothing given back, each what-if row gets the live node's verdict and reason."""
    rig = rig_with(
        pod("a", node="gpu-a", gpus=6),
        pod("b", node="gpu-b", gpus=2, cpu="60"),
        nodes=("gpu-a", "gpu-b", "gpu-c"),
    )
    state = rig.cluster.state
    assert state is not None
    rows = np.array([2, 0, 1, 0], dtype=np.int64)
    view = rig.view()
    for wants in (pending(), pending(gpus=2, cpu="8"), pending(gpus=0, cpu="10")):
        request = rig.facts(wants).request
        live = judge(state, view.policy, request, rows, view.signals)
        after = given_back(state, rows, [[] for _ in rows])
        found = judge(after, view.policy, request, np.arange(len(rows)), view.signals)
        assert found.refused.tolist() == live.refused.tolist()
        assert found.reasons.tolist() == live.reasons.tolist()


def test_settings_refuse_levels_out_of_order() -> None:
    from common.errors import ConfigError

    with pytest.raises(ConfigError, match="level_min_priority"):
        EvictionSettings(level_min_priority={"medium": 5, "high": 1})
    with pytest.raises(ConfigError, match="min_level_gap"):
        dataclasses.replace(EvictionSettings(), min_level_gap=0)


def test_the_preempt_verb_never_breaks_a_gang_beyond_what_was_proposed() -> None:
    """kube-scheduler evicts only the pods it proposed on the node: a victim whose gang
    would have to go along (from another node) is not allowed there."""
    rig = rig_with(
        member("g-0", "gpu-a", 8),
        member("g-1", "gpu-c", 1),
        pod("low-b", node="gpu-b", gpus=8),
        nodes=("gpu-a", "gpu-b", "gpu-c"),
    )
    proposed = {
        "gpu-a": frozenset({"uid-ns-g-0"}),
        "gpu-b": frozenset({"uid-ns-low-b"}),
    }
    narrowed = narrow_victims(rig.view(), rig.facts(pending()), proposed, rig.evictions, NOW)
    assert {n: [v.name for v in vs] for n, vs in narrowed.items()} == {"gpu-b": ["low-b"]}


def test_a_budget_not_yet_observed_allows_nothing() -> None:
    stale = pdb("infer", {"app": "infer"}, allowed=3)
    stale["metadata"]["generation"] = 2
    budget = budget_of(stale)
    assert budget is not None and budget.allowed == 0
    assert budget_of(pdb("all", {}, allowed=3)) is None  # an empty selector covers no pod


def test_a_checkpoint_time_that_is_not_a_time_counts_as_none() -> None:
    rig = EvictRig()
    for bad in ("nan", "inf", "yesterday", "2026-09-21T12:00:00"):  # the last: no zone
        obj = pod("v", node="gpu-a", annotations={"stowage.io/last-checkpoint": bad})
        assert rig.facts(obj).checkpoint_at is None


def test_without_checkpoints_the_pod_that_started_last_loses_least() -> None:
    rig = rig_with(
        pod("old", node="gpu-a", gpus=8, started_s_ago=7200),
        pod("young", node="gpu-b", gpus=8, started_s_ago=300),
    )
    chosen = plan(rig.view(), rig.facts(pending()), rig.evictions, NOW)
    assert names(chosen) == ["young"]
    assert isinstance(chosen, Plan) and chosen.cost[2] == pytest.approx(300)


def test_the_minimum_outside_the_cheapest_dozen_is_found() -> None:
    """Finding 4: twelve cheap 1-CPU pods, started a minute ago, free 12 CPUs together;
    the pod lacks 28. The one pod that frees enough is the day-old 40-CPU one, which a
    search over the cheapest twelve candidates never saw."""
    rig = EvictRig().nodes(node("cpu-a", cpu="64", gpus=0))
    rig.pods(*(pod(f"c-{k:02}", node="cpu-a", cpu="1", started_s_ago=60) for k in range(12)))
    rig.pods(pod("big", node="cpu-a", cpu="40", started_s_ago=86_400))
    result = plan(rig.view(), rig.facts(pending(gpus=0, cpu="40")), rig.evictions, NOW)
    assert names(result) == ["big"]


class SteppingClock:
    """A monotonic clock a second further on at every reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_the_deadline_bounds_the_weighing_of_candidates_too() -> None:
    """200 full nodes, one pod each; the cheapest victim (10 s of work at stake) is on the
    last node. With the deadline gone by the first look, only the nodes weighed by then
    are planned on: a plan, cut, on one of the first 64 — not the cheapest overall."""
    rig = EvictRig(settings=roomy_caps())
    names_ = [f"n-{k:03d}" for k in range(200)]
    rig.nodes(*(node(n, cpu="4", gpus=0) for n in names_))
    rig.pods(*(pod(f"c-{k}", node=n, cpu="4") for k, n in enumerate(names_[:-1])))
    rig.pods(pod("cheap", node=names_[-1], cpu="4", started_s_ago=10))
    whole = plan(rig.view(), rig.facts(pending(gpus=0, cpu="4")), rig.evictions, NOW)
    assert isinstance(whole, Plan) and whole.node == names_[-1] and not whole.cut
    clock = SteppingClock()
    deadline = Deadline(clock, clock() + 0.5)
    result = plan(rig.view(), rig.facts(pending(gpus=0, cpu="4")), rig.evictions, NOW, deadline)
    assert isinstance(result, Plan) and result.cut
    assert result.node in names_[:64]


@pytest.mark.parametrize(("seconds", "cut"), [(0.5, True), (1e9, False)])
def test_the_deadline_cuts_the_search_and_says_so(seconds: float, cut: bool) -> None:
    """Sixteen 4-CPU pods fill the node and the pod needs all 64 CPUs: the only set is
    all sixteen, found after every smaller size was tried — or, when the deadline cuts
    the search before, as the first set of the least size that could free enough (the
    cheapest pods first), and the plan says it was cut."""
    rig = EvictRig(settings=roomy_caps()).nodes(node("cpu-a", cpu="64", gpus=0))
    rig.pods(*(pod(f"c-{k}", node="cpu-a", cpu="4") for k in range(16)))
    clock = SteppingClock()
    deadline = Deadline(clock, clock() + seconds)
    result = plan(rig.view(), rig.facts(pending(gpus=0, cpu="64")), rig.evictions, NOW, deadline)
    assert isinstance(result, Plan)
    assert len(names(result)) == 16
    assert result.cut is cut
    assert ("the planning deadline cut the search" in result.reason) is cut
