"""Colocation through ``POST /v1/reports``: the pods section read, the leader's throttle in
the answer (quota, reason, BE pods, local bounds, TTL), a follower's answer valid for no
time, and a silent node released by the receipt clock."""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp import web
from msgspec import structs

from common import codec
from common.schema import (
    Absent,
    Directives,
    NodeReport,
    PodInfo,
    PodsSection,
    PodUsage,
    PsiGroup,
    PsiLine,
    PsiResource,
    Resources,
)
from coordinator import debug
from coordinator.config import ColocationPool, ColocationSettings
from coordinator.services import SERVICES
from tests.coordinator.ingest.conftest import (
    IngestRig,
    MakeRig,
    node_json,
    report_for,
    settings_with,
)

NONE = Resources(cpu_m=0, mem_b=0, gpu=0, hugepages_b=0)


def pod(uid: str, *, labels: dict[str, str], qos: str = "Burstable") -> PodInfo:
    return PodInfo(
        namespace="default" if uid != "sys" else "kube-system",
        name=f"pod-{uid}",
        uid=uid,
        phase="Running",
        qos_class=qos,
        priority=0,
        priority_class=None,
        requests=NONE,
        limits=NONE,
        labels=labels,
    )


def use(cpu_m: int, stall: float | None = None) -> PodUsage:
    return PodUsage(cpu_m=cpu_m, cpu_some_avg10_pct=stall, cpu_some_rate_pct=None)


def colocated(node: str, ls_stall: float, *, seq: int = 1) -> NodeReport:
    """A report with one LS pod stalled ``ls_stall`` %, two BE pods (one by label, one by
    QoS class), a system pod, and low node PSI (the LS pods' own stall must win)."""
    base = report_for(node, seq=seq)
    pods = [
        pod("ls-1", labels={"stowage.io/qos": "LS"}),
        pod("be-1", labels={"stowage.io/qos": "BE"}),
        pod("be-2", labels={}, qos="BestEffort"),
        pod("sys", labels={"stowage.io/qos": "BE"}),  # kube-system: never BE
    ]
    usage = {
        "ls-1": use(100_000, ls_stall),
        "be-1": use(60_000, 90.0),
        "be-2": use(20_000),
        "sys": use(500),
    }
    assert not isinstance(base.psi, str)
    calm = PsiLine(avg10_pct=1.0, avg60_pct=1.0, avg300_pct=1.0, total_us=1)
    system = PsiGroup(
        path="/proc/pressure", cpu=PsiResource(some=calm, full=None), memory="x", io="x", irq="x"
    )
    return structs.replace(
        base,
        psi=structs.replace(base.psi, system=system),
        pods=PodsSection(measured_at=base.measured_at, source="apiserver", pods=pods),
        pod_usage=usage,
    )


async def answer(rig: IngestRig, report: NodeReport) -> Directives:
    resp = await rig.post(report)
    assert resp.status == 200, await resp.text()
    return codec.decode_directives(await resp.read())


async def test_the_leader_throttles_best_effort_after_sustained_ls_stall(rig: IngestRig) -> None:
    first = await answer(rig, colocated("node-a", 45.0, seq=1))
    # No quota yet, but local bounds: the agent is told its BE pods so it can act alone.
    assert (first.be_cpu_quota_m, first.be_pods) == (None, ["be-1", "be-2"])
    assert first.ttl_s == rig.services.settings.ingest.directive_ttl_s
    assert first.local is not None and first.local.quota_m == 40_000  # half of BE's 80 cores
    rig.clock.advance(10.0)
    second = await answer(rig, colocated("node-a", 47.5, seq=2))
    assert second.be_cpu_quota_m == 40_000
    assert second.be_reason == "tightened: LS cpu some avg10 47.5% >= 30% for 10s"
    assert second.be_pods == ["be-1", "be-2"]
    assert second.local is not None and second.local.quota_m == 22_150  # the floor: 10 %
    changes = rig.services.metrics.registry.get_sample_value(
        "stowage_be_throttle_changes_total", {"change": "tightened"}
    )
    assert changes == 1


async def test_between_whole_reports_fresh_pod_use_joins_the_carried_pods(
    rig: IngestRig,
) -> None:
    # The agent sends its pods whole once, then "unchanged" with each cycle's use.
    await answer(rig, colocated("node-a", 10.0, seq=1))
    rig.clock.advance(10.0)
    stalled = structs.replace(colocated("node-a", 45.0, seq=2), pods=Absent("unchanged"))
    assert (await answer(rig, stalled)).be_cpu_quota_m is None  # high, not yet for 10 s
    rig.clock.advance(10.0)
    still = structs.replace(colocated("node-a", 47.5, seq=3), pods=Absent("unchanged"))
    third = await answer(rig, still)
    assert third.be_cpu_quota_m == 40_000
    assert third.be_reason == "tightened: LS cpu some avg10 47.5% >= 30% for 10s"
    assert third.be_pods == ["be-1", "be-2"]  # the BE pods of the whole report, carried


async def test_a_follower_answers_valid_for_no_time(rig: IngestRig) -> None:
    rig.cluster.colocation.elected = True  # leader election runs; this replica does not lead
    await answer(rig, colocated("node-a", 45.0, seq=1))
    rig.clock.advance(10.0)
    follower = await answer(rig, colocated("node-a", 47.5, seq=2))
    assert (follower.ttl_s, follower.be_cpu_quota_m, follower.local) == (0.0, None, None)
    assert follower.be_reason == "not the leader: the leader's directives apply"
    # It stepped the controller all the same: on taking over it answers what it decided.
    assert rig.cluster.colocation.throttles["node-a"].quota_m == 40_000
    rig.services.leader.set()
    rig.clock.advance(1.0)
    leader = await answer(rig, colocated("node-a", 47.5, seq=3))
    assert (leader.be_cpu_quota_m, leader.ttl_s) == (40_000, 60.0)


async def test_a_silent_node_is_released_by_the_receipt_clock(rig: IngestRig) -> None:
    await answer(rig, colocated("node-a", 45.0, seq=1))
    rig.clock.advance(10.0)
    await answer(rig, colocated("node-a", 47.5, seq=2))
    colocation = rig.cluster.colocation
    assert colocation.throttles["node-a"].quota_m == 40_000
    rig.clock.advance(rig.services.settings.signals.report_ttl_s)
    rig.cluster.expire()
    assert colocation.throttles["node-a"].quota_m == 40_000  # exactly the TTL: still fresh
    rig.clock.advance(0.5)
    rig.cluster.expire()
    throttle = colocation.throttles["node-a"]
    assert (throttle.quota_m, throttle.reason) == (None, "no fresh report: released")
    assert "node-a" not in colocation.facts
    assert colocation.be_directive("node-a").quota_m is None


async def test_the_report_clock_plays_no_part(rig: IngestRig) -> None:
    # An agent whose clock runs behind cannot make its throttle look stale, nor keep one.
    await answer(rig, colocated("node-a", 45.0, seq=1))
    rig.clock.advance(10.0)
    behind = colocated("node-a", 47.5, seq=2)
    behind = structs.replace(behind, measured_at=1.0)
    assert (await answer(rig, behind)).be_cpu_quota_m == 40_000


async def test_colocation_off_answers_no_throttle(make_rig: MakeRig) -> None:
    off = dataclasses.replace(settings_with(), colocation=ColocationSettings(enabled=False))
    rig = await make_rig(off)
    await answer(rig, colocated("node-a", 45.0, seq=1))
    rig.clock.advance(10.0)
    second = await answer(rig, colocated("node-a", 47.5, seq=2))
    assert (second.be_cpu_quota_m, second.local) == (None, None)
    assert second.be_reason == "colocation off in pool off"


async def test_a_removed_node_takes_its_throttle_along(rig: IngestRig) -> None:
    await answer(rig, colocated("node-a", 45.0, seq=1))
    rig.cluster.remove_node("node-a")
    colocation = rig.cluster.colocation
    assert "node-a" not in colocation.throttles and "node-a" not in colocation.facts


async def test_debug_colocation_says_why_be_is_throttled(
    rig: IngestRig, aiohttp_client: Any
) -> None:
    app = web.Application()
    app[SERVICES] = rig.services
    debug.add_routes(app)
    client = await aiohttp_client(app)
    await answer(rig, colocated("node-a", 45.0, seq=1))
    rig.clock.advance(10.0)
    await answer(rig, colocated("node-a", 47.5, seq=2))
    rig.clock.advance(4.0)
    body = await (await client.get("/debug/colocation", params={"node": "node-a"})).json()
    assert body["leading"] is True
    assert body["be_cpu_quota_m"] == 40_000
    assert body["reason"] == "tightened: LS cpu some avg10 47.5% >= 30% for 10s"
    assert body["changed_s_ago"] == 4.0
    assert body["report_received_s_ago"] == 4.0
    assert body["pool"] == "default"
    assert body["tightening_in_s"] == 6.0  # still high: the next step in 10 − 4 s
    facts = body["facts"]
    assert (facts["pressure_pct"], facts["pressure_source"]) == (47.5, "ls-pods")
    assert (facts["ls_usage_m"], facts["be_usage_m"], facts["be_pods"]) == (
        100_500,
        80_000,
        2,
    )  # LS and the system pod
    assert body["reclaimable_m"] == 221_500 - 100_500 - 22_150
    listing = await (await client.get("/debug/colocation")).json()
    assert [n["node"] for n in listing["throttled"]] == ["node-a"]
    missing = await client.get("/debug/colocation", params={"node": "nope"})
    assert missing.status == 404
    assert (await missing.json()) == {"error": "node nope is not known"}
    rig.cluster.colocation.elected = True
    assert (await (await client.get("/debug/colocation")).json())["leading"] is False


def throttled_gauge(rig: IngestRig) -> float | None:
    return rig.services.metrics.registry.get_sample_value("stowage_be_throttled_nodes")


async def test_the_throttled_nodes_gauge_follows_changes(rig: IngestRig) -> None:
    for node, token in (("node-a", "token-of-node-a"), ("node-b", "token-of-node-b")):
        resp = await rig.post(colocated(node, 45.0, seq=1), token=token)
        assert resp.status == 200
    rig.clock.advance(10.0)
    for node, token in (("node-a", "token-of-node-a"), ("node-b", "token-of-node-b")):
        resp = await rig.post(colocated(node, 47.5, seq=2), token=token)
        assert resp.status == 200
    assert throttled_gauge(rig) == 2
    rig.clock.advance(10.0)  # tightened again: still one throttled node each
    assert (await answer(rig, colocated("node-a", 47.5, seq=3))).be_cpu_quota_m == 22_150
    assert throttled_gauge(rig) == 2
    rig.cluster.remove_node("node-b")
    assert throttled_gauge(rig) == 1
    rig.clock.advance(61.0)
    rig.cluster.expire()
    assert throttled_gauge(rig) == 0


async def test_a_node_relabelled_into_another_pool_takes_its_settings(make_rig: MakeRig) -> None:
    eager = ColocationPool(name="eager", selector={"tier": "online"}, tighten_after_s=1.0)
    settings = dataclasses.replace(settings_with(), colocation=ColocationSettings(pools=(eager,)))
    rig = await make_rig(settings)
    colocation = rig.cluster.colocation
    assert colocation.pool_of("node-a").name == "default"
    labels = {"kubernetes.io/hostname": "node-a", "tier": "online"}
    rig.cluster.upsert_node(
        {**node_json("node-a"), "metadata": {"name": "node-a", "labels": labels}}
    )
    assert colocation.pool_of("node-a").name == "eager"
    await answer(rig, colocated("node-a", 45.0, seq=1))
    rig.clock.advance(1.0)
    assert (await answer(rig, colocated("node-a", 45.0, seq=2))).be_cpu_quota_m == 40_000


def rated(seq: int, rate: float, measured_at: float) -> NodeReport:
    """``colocated`` with the LS pod's stall measured as a rate since the previous sample
    (its avg10 still far below), sampled at ``measured_at`` on the agent's clock."""
    report = colocated("node-a", 5.0, seq=seq)
    assert isinstance(report.pod_usage, dict)
    usage = dict(report.pod_usage)
    usage["ls-1"] = PodUsage(cpu_m=100_000, cpu_some_avg10_pct=5.0, cpu_some_rate_pct=rate)
    return structs.replace(report, pod_usage=usage, measured_at=measured_at)


T0 = 1_790_000_000.0


async def test_a_rate_over_a_whole_dwell_between_consecutive_reports_tightens_at_once(
    rig: IngestRig,
) -> None:
    await answer(rig, rated(1, 3.0, T0))
    rig.clock.advance(10.0)
    second = await answer(rig, rated(2, 47.5, T0 + 10.0))
    assert second.be_cpu_quota_m == 40_000
    assert second.be_reason == "tightened: LS cpu some 47.5% over the last 10s >= 30% for 10s"


async def test_a_rate_counts_only_the_time_both_clocks_agree_it_covers(rig: IngestRig) -> None:
    # Received 10 s apart, sampled 4 s apart (the first report waited in transit): 4 s.
    await answer(rig, rated(1, 3.0, T0))
    rig.clock.advance(10.0)
    second = await answer(rig, rated(2, 47.5, T0 + 4.0))
    assert second.be_cpu_quota_m is None
    assert second.be_reason == "no throttle yet: LS cpu some 47.5% over the last 4s >= 30% for 10s"


async def test_a_rate_after_a_missed_report_counts_from_now(rig: IngestRig) -> None:
    # seq 2 never arrived: seq 3's rate covers only the time since sample 2, unknown here.
    await answer(rig, rated(1, 3.0, T0))
    rig.clock.advance(20.0)
    third = await answer(rig, rated(3, 47.5, T0 + 20.0))
    assert third.be_cpu_quota_m is None
    assert third.be_reason == (
        "no throttle yet: LS cpu some 47.5% since the previous sample >= 30% for 10s"
    )


async def test_a_rate_covers_at_most_the_report_ttl(rig: IngestRig) -> None:
    ttl = rig.services.settings.signals.report_ttl_s
    await answer(rig, rated(1, 3.0, T0))
    rig.clock.advance(500.0)  # no expiry ran between: the node still has its facts
    second = await answer(rig, rated(2, 47.5, T0 + 500.0))
    assert second.be_reason == (
        f"tightened: LS cpu some 47.5% over the last {ttl:.0f}s >= 30% for 10s"
    )


async def test_an_agent_clock_stepped_back_counts_no_time(rig: IngestRig) -> None:
    await answer(rig, rated(1, 3.0, T0))
    rig.clock.advance(10.0)
    assert (await answer(rig, rated(2, 47.5, T0 - 30.0))).be_cpu_quota_m is None
    rig.clock.advance(10.0)
    # High for 10 s on the receipt clock: the dwell was not pushed into the future.
    assert (await answer(rig, rated(3, 47.5, T0 - 20.0))).be_cpu_quota_m == 40_000
