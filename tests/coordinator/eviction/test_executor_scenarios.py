"""The eviction executor against the API emulator (PDBs answer 429), through the real
client, the real Evictor and the real Event recorder, on a fake clock: dry run changes
nothing, the cooldown per queue, caps per cycle, the rate, loop prevention, and a PDB
stopping a preemption before anything is evicted. The approval gate:
``test_approval_gate.py``."""

from __future__ import annotations

import pytest

from hack.kubeapi import KubeApi
from hack.kubeapi.resources import PDBS, PODS
from tests.coordinator.eviction.executorrig import Rig, preemption, pressure


async def test_a_plan_is_executed_and_told(rig: Rig) -> None:
    rig.pod("big", node=None, phase="Pending")
    a, b = rig.pod("a"), rig.pod("b")
    assert await rig.cycle(preemption([a, b])) == ["evicted"]
    assert not rig.exists(a) and not rig.exists(b)
    assert rig.evicted() == 2
    assert "Evicted" in rig.reasons("a") and "PreemptionExecuted" in rig.reasons("big")
    assert "preemption default/big evicted" in rig.log.lines()[-1]


async def test_dry_run_reports_but_changes_nothing(kube: KubeApi) -> None:
    rig = Rig(kube)  # evictions.enabled defaults to false
    try:
        a = rig.pod("a", labels={"app": "a"})
        kube.add_pdb("a", "default", {"app": "a"}, disruptions_allowed=1)
        rv = kube.store.rv
        assert await rig.cycle(pressure([a])) == ["dry-run"]
        assert rig.exists(a)
        assert kube.store.get(PDBS, "default", "a")["status"]["disruptionsAllowed"] == 1
        # Only Events were written (the report), no pod or budget changed.
        changed = [
            o for r in (PODS, PDBS) for o in kube.store.list(r, None)[0]
            if int(o["metadata"]["resourceVersion"]) > rv
        ]  # fmt: skip
        assert changed == []
        assert rig.metrics.evictions.labels("pressure", "dry-run")._value.get() == 1
        assert "WouldEvict" in rig.reasons("a")
        assert "dry-run" in rig.log.lines()[-1]
    finally:
        rig.close()


async def test_one_round_per_queue_per_cooldown(rig: Rig) -> None:
    a, b, c = rig.pod("a"), rig.pod("b"), rig.pod("c")
    assert await rig.cycle(preemption([a])) == ["evicted"]
    rig.clock.advance(299)
    assert await rig.cycle(preemption([b], preemptor="default/other")) == ["refused"]
    assert rig.exists(b)
    assert "cooling down" in rig.log.lines()[-1]
    assert await rig.cycle(preemption([c], queue="team-b")) == ["evicted"]  # another queue
    rig.clock.advance(1)
    assert await rig.cycle(preemption([b])) == ["evicted"]


async def test_a_preemption_over_the_caps_is_refused_whole(kube: KubeApi) -> None:
    rig = Rig(kube, enabled=True, max_per_node_per_cycle=2)
    try:
        pods = [rig.pod(f"p{i}") for i in range(3)]
        assert await rig.cycle(preemption(pods)) == ["refused"]
        assert all(rig.exists(p) for p in pods)
        assert "exceed" in rig.log.lines()[-1]
    finally:
        rig.close()


@pytest.mark.parametrize(
    ("cap", "spread"),
    [
        ("max_per_cycle", [("n1", "ns1"), ("n2", "ns2"), ("n3", "ns3")]),
        ("max_per_node_per_cycle", [("n1", "ns1"), ("n1", "ns2"), ("n1", "ns3")]),
        ("max_per_namespace_per_cycle", [("n1", "ns1"), ("n2", "ns1"), ("n3", "ns1")]),
    ],
)
async def test_each_cap_holds_rounds_within_a_cycle(
    kube: KubeApi, cap: str, spread: list[tuple[str, str]]
) -> None:
    rig = Rig(kube, enabled=True, **{cap: 2})
    try:
        pods = [rig.pod(f"p{i}", node=n, namespace=ns) for i, (n, ns) in enumerate(spread)]
        plans = [
            preemption([p], preemptor=f"default/big-{i}", queue=f"q{i}", node=p.node)
            for i, p in enumerate(pods)
        ]
        assert await rig.cycle(*plans) == ["evicted", "evicted", "refused"]
        assert rig.exists(pods[2])
        assert await rig.cycle(plans[2]) == ["evicted"]  # a new cycle, fresh caps
    finally:
        rig.close()


async def test_a_pressure_plan_is_cut_to_the_caps(kube: KubeApi) -> None:
    rig = Rig(kube, enabled=True, max_per_node_per_cycle=2)
    try:
        pods = [rig.pod(f"p{i}") for i in range(3)]
        assert await rig.cycle(pressure(pods)) == ["partial"]
        assert [rig.exists(p) for p in pods] == [False, False, True]
    finally:
        rig.close()


async def test_the_rate_limits_evictions_across_cycles(kube: KubeApi) -> None:
    rig = Rig(kube, enabled=True, max_evictions_per_s=0.1, eviction_burst=1)
    try:
        a, b = rig.pod("a", node="n1"), rig.pod("b", node="n2")
        assert await rig.cycle(pressure([a], "n1"), pressure([b], "n2")) == ["evicted", "refused"]
        rig.clock.advance(9.9)
        assert await rig.cycle(pressure([b], "n2")) == ["refused"]
        rig.clock.advance(0.1)  # 10 s at 0.1/s: one more token
        assert await rig.cycle(pressure([b], "n2")) == ["evicted"]
    finally:
        rig.close()


async def test_a_budget_stops_a_preemption_before_anything_is_evicted(rig: Rig) -> None:
    a = rig.pod("a")
    b = rig.pod("b", labels={"app": "b"})
    rig.kube.add_pdb("b", "default", {"app": "b"}, disruptions_allowed=0)
    assert await rig.cycle(preemption([a, b])) == ["refused"]
    assert rig.exists(a) and rig.exists(b)
    assert "disruption budget b" in rig.log.lines()[-1]
    # Not spent: a later plan of the same queue may go.
    assert await rig.cycle(preemption([a])) == ["evicted"]


async def test_a_replacement_is_not_evicted_again_for_the_same_reason(rig: Rig) -> None:
    first = rig.pod("web-1", owner="web-rs")
    assert await rig.cycle(pressure([first])) == ["evicted"]
    replacement = rig.pod("web-2", node="n2", owner="web-rs")
    rig.clock.advance(60)
    assert await rig.cycle(pressure([replacement], node="n2")) == ["refused"]
    assert rig.exists(replacement)
    assert "same owner ReplicaSet/default/web-rs" in rig.log.lines()[-1]
    # Another reason is another matter (the queue n2 has not had a round either).
    assert await rig.cycle(preemption([replacement], node="n2")) == ["evicted"]


async def test_the_replacement_may_go_once_the_cooldown_passed(rig: Rig) -> None:
    first = rig.pod("web-1", owner="web-rs")
    assert await rig.cycle(pressure([first])) == ["evicted"]
    replacement = rig.pod("web-2", owner="web-rs")
    rig.clock.advance(300)
    assert await rig.cycle(pressure([replacement])) == ["evicted"]


async def test_a_pressure_plan_skips_spared_victims_and_evicts_the_rest(rig: Rig) -> None:
    first = rig.pod("web-1", owner="web-rs")
    assert await rig.cycle(pressure([first], node="n0")) == ["evicted"]
    replacement, other = rig.pod("web-2", owner="web-rs"), rig.pod("batch-1", owner="batch")
    assert await rig.cycle(pressure([replacement, other])) == ["partial"]
    assert rig.exists(replacement) and not rig.exists(other)
