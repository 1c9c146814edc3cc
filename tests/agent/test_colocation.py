"""The agent's colocation decisions on a fake clock (TTL lapse, local hold, confirmation,
withdrawal), and the fast path end to end on real cgroups: LS contention → BE quota."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from msgspec import structs

from agent.colocation import BeThrottle, admit
from agent.enforcer import Applied, BePod, Enforcer
from agent.metrics import AgentMetrics
from common.clock import SystemClock
from common.schema import (
    SCHEMA_VERSION,
    Directives,
    Enforcement,
    LocalBounds,
    PodInfo,
    PodsSection,
    Resources,
)
from tests.hosts import FakeClock
from tests.realcgroup import RealCgroupTree

BE_UID = "bebebebe-0000-4000-8000-000000000001"
LS_UID = "15151515-0000-4000-8000-000000000002"
BOUNDS = LocalBounds(pressure_high_pct=30.0, window_s=1.0, quota_m=300, hold_s=20.0)


def pod(uid: str, qos: str, cpu_m: int = 0, **changes: object) -> PodInfo:
    res = Resources(cpu_m=cpu_m, mem_b=0, gpu=0, hugepages_b=0, extended={})
    made = PodInfo(
        namespace="ns", name=uid[:8], uid=uid, phase="Running", qos_class=qos, priority=0,
        priority_class=None, requests=res, limits=res, labels={},
    )  # fmt: skip
    return structs.replace(made, **changes)


PODS = PodsSection(
    measured_at=0.0, source="kubelet", pods=[pod(BE_UID, "BestEffort"), pod(LS_UID, "Burstable")]
)


def directive(quota_m: int | None, *, ttl_s: float = 30.0, local: LocalBounds | None = BOUNDS):
    return Directives(
        schema_version=SCHEMA_VERSION, node="node-a", issued_at=1.0, ttl_s=ttl_s,
        be_cpu_quota_m=quota_m, be_pods=[BE_UID, "00000000-0000-4000-8000-00000000dead"],
        local=local,
    )  # fmt: skip


@dataclass
class FakeEnforcer:
    """Records calls; what the enforcer itself does is tested on real cgroups."""

    calls: list[tuple[int | None, str, tuple[str, ...]]] = field(default_factory=list)

    def apply(self, quota_m: int | None, be_pods: list[BePod], source: str = "coordinator"):
        self.calls.append((quota_m, source, tuple(p.uid for p in be_pods)))
        return Applied(quota_m, "parent", (), 1)

    def restore_all(self) -> Applied:
        self.calls.append((None, "default", ()))
        return Applied(None, "none", (), 0)

    def current(self) -> Enforcement:
        return Enforcement(be_cpu_quota_m=None, source="default", applied_at=None, local_actions=0)


@dataclass
class Heard:
    """The reporter's view: the directive in force while its TTL lasts."""

    clock: FakeClock
    d: Directives | None = None
    at: float = 0.0

    def arrive(self, d: Directives) -> None:
        self.d, self.at = d, self.clock.monotonic()

    def __call__(self) -> Directives | None:
        if self.d is None or self.clock.monotonic() - self.at >= self.d.ttl_s:
            return None
        return self.d


def rig() -> tuple[FakeClock, Heard, FakeEnforcer, BeThrottle]:
    clock = FakeClock()
    heard, enforcer = Heard(clock), FakeEnforcer()
    throttle = BeThrottle(enforcer, clock, heard)
    throttle.pods_seen(PODS)
    return clock, heard, enforcer, throttle


def test_coordinator_quota_applies_to_known_be_pods_and_the_ttl_restores_defaults():
    clock, heard, enforcer, throttle = rig()
    heard.arrive(directive(800))
    throttle.directives_arrived()
    assert enforcer.calls == [(800, "coordinator", (BE_UID,))]  # the unknown UID is skipped
    clock.advance(29.9)
    throttle.refresh()
    assert len(enforcer.calls) == 1  # unchanged: the enforcer is not asked again
    clock.advance(0.1)  # nothing valid heard for the TTL
    throttle.refresh()
    assert enforcer.calls[-1] == (None, "default", ())


def test_local_tightening_lasts_hold_s_then_the_directive_rules_again():
    clock, heard, enforcer, throttle = rig()
    heard.arrive(directive(None, ttl_s=60.0))
    throttle.directives_arrived()
    throttle.on_pressure(Path("ls"), 45.0)
    assert enforcer.calls[-1] == (300, "local", (BE_UID,))
    clock.advance(10.0)
    throttle.on_pressure(Path("ls"), 45.0)  # still stalled: the hold runs from here
    assert enforcer.calls[-1] == (300, "local", (BE_UID,)) and len(enforcer.calls) == 2
    clock.advance(19.9)
    throttle.refresh()
    assert enforcer.calls[-1][1] == "local"
    assert throttle.next_deadline() == pytest.approx(0.1)
    clock.advance(0.1)
    throttle.refresh()
    assert enforcer.calls[-1] == (None, "coordinator", (BE_UID,))


def test_a_confirming_directive_ends_the_local_hold():
    clock, heard, enforcer, throttle = rig()
    heard.arrive(directive(2000))
    throttle.directives_arrived()
    throttle.on_pressure(Path("ls"), 50.0)
    assert enforcer.calls[-1] == (300, "local", (BE_UID,))
    clock.advance(5.0)
    heard.arrive(directive(250))  # the coordinator tightens past the local quota
    throttle.directives_arrived()
    assert enforcer.calls[-1] == (250, "coordinator", (BE_UID,))
    heard.arrive(directive(2000))  # and may relax later, long before the hold would end
    throttle.directives_arrived()
    assert enforcer.calls[-1] == (2000, "coordinator", (BE_UID,))


def test_no_local_action_without_bounds_or_when_the_coordinator_is_tighter():
    clock, heard, enforcer, throttle = rig()
    heard.arrive(directive(None, local=None))
    throttle.directives_arrived()
    throttle.on_pressure(Path("ls"), 90.0)
    assert [c[1] for c in enforcer.calls] == ["coordinator"]
    heard.arrive(directive(200))  # tighter than the bounds' 300
    throttle.directives_arrived()
    throttle.on_pressure(Path("ls"), 90.0)
    assert enforcer.calls[-1] == (200, "coordinator", (BE_UID,))
    heard.arrive(directive(None))
    throttle.directives_arrived()
    throttle.on_pressure(Path("ls"), 90.0)
    heard.arrive(directive(None, local=None))  # bounds withdrawn: the hold ends at once
    throttle.directives_arrived()
    assert enforcer.calls[-1] == (None, "coordinator", (BE_UID,))


def test_ttl_lapse_during_a_local_hold_restores_and_forgets_it():
    clock, heard, enforcer, throttle = rig()
    heard.arrive(directive(None, ttl_s=10.0))
    throttle.directives_arrived()
    throttle.on_pressure(Path("ls"), 45.0)
    clock.advance(10.0)
    throttle.refresh()
    assert enforcer.calls[-1] == (None, "default", ())
    heard.arrive(directive(None, ttl_s=10.0))  # the coordinator is back, no stall now
    throttle.directives_arrived()
    assert enforcer.calls[-1] == (None, "coordinator", (BE_UID,))


async def test_cancelling_the_loop_restores_defaults():
    clock, heard, enforcer, throttle = rig()
    heard.arrive(directive(800))
    throttle.directives_arrived()
    task = asyncio.create_task(throttle.run())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert enforcer.calls[-1] == (None, "default", ())


SYS_UID = "5e5e5e5e-0000-4000-8000-000000000003"


def test_a_pod_the_node_sees_as_system_is_refused_logged_once_counted_and_reported(caplog):
    clock = FakeClock()
    heard = Heard(clock)
    enforcer, metrics = FakeEnforcer(), AgentMetrics()
    throttle = BeThrottle(enforcer, clock, heard, metrics=metrics)
    system = pod(SYS_UID, "BestEffort", namespace="kube-system", name="coredns-7d")
    throttle.pods_seen(structs.replace(PODS, pods=[*PODS.pods, system]))
    d = structs.replace(directive(800), be_pods=[BE_UID, SYS_UID])
    with caplog.at_level("WARNING", logger="agent.colocation"):
        for _ in range(2):  # the coordinator repeats its answer every report
            heard.arrive(d)
            throttle.directives_arrived()
        throttle.on_pressure(Path("ls"), 90.0)  # nor does the fast path touch it
    assert {c[2] for c in enforcer.calls} == {(BE_UID,)}
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert refusals == [
        f"directive: refused to throttle kube-system/coredns-7d (uid {SYS_UID}), named"
        " best-effort: is a system pod: namespace kube-system"
    ]
    count = metrics.registry.get_sample_value
    assert count("stowage_agent_directive_refusals_total", {"reason": "system"}) == 2
    assert (throttle.status().error or "").startswith("refused: kube-system/coredns-7d")
    clock.advance(30.0)  # the directive lapses: nothing refused any more
    throttle.refresh()
    assert throttle.status().error is None


def test_admit_keeps_unknown_uids_out_of_both_lists():
    admitted, refused = admit([LS_UID, BE_UID, "0000-dead"], PODS)
    assert [p.uid for p in admitted] == [BE_UID]
    assert [(r.uid, r.kind) for r in refused] == [(LS_UID, "latency-sensitive")]
    assert refused[0].reason == "is latency-sensitive: Burstable, no BE label"
    assert admit([BE_UID], None) == ((), ())


# ---------------------------------------------------------------- real kernel


async def test_fast_path_onset_to_be_quota_on_real_cgroups(real_cgroup_tree: RealCgroupTree):
    """Idle LS pod, BE pod at its defaults; the LS pod starts contending for CPU; the agent's
    own watch (100 ms poll here: no CAP_SYS_RESOURCE) throttles BE within the bounds."""
    tree = real_cgroup_tree
    if "unified" not in tree.controllers:
        pytest.skip("no cgroup2 tree on this host: no per-cgroup PSI for the fast path")
    be_dir = tree.pod(BE_UID, "BestEffort")
    ls_dir = tree.pod(LS_UID, "Burstable")
    tree.busy(be_dir)
    quota_file = tree.layout.pods_dir("besteffort", "cpu") / "cpu.cfs_quota_us"
    original = quota_file.read_text().strip()
    clock = SystemClock()
    enforcer = Enforcer(tree.layout, tree.root.parent / "journal.json", clock)
    d = directive(None, ttl_s=120.0)
    throttle = BeThrottle(enforcer, clock, lambda: d, tree.layout)
    throttle.pods_seen(structs.replace(PODS, pods=[*PODS.pods]))
    task = asyncio.create_task(throttle.run())
    try:
        throttle.directives_arrived()
        assert throttle.watch is not None
        await asyncio.sleep(1.0)  # a calm window first, so what follows is an onset
        assert quota_file.read_text().strip() == original
        onset = time.monotonic()
        for _ in range(3):
            tree.busy(ls_dir)
        async with asyncio.timeout(30):
            while quota_file.read_text().strip() == original:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        took = time.monotonic() - onset
        period = int((quota_file.parent / "cpu.cfs_period_us").read_text())
        assert int(quota_file.read_text()) == BOUNDS.quota_m * period // 1000
        status = throttle.status()
        assert (status.source, status.be_cpu_quota_m, status.local_actions) == ("local", 300, 1)
        print(
            f"fast path ({throttle.watch.mode}): LS onset -> BE quota applied {took * 1000:.0f} ms"
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert quota_file.read_text().strip() == original  # the loop's end restored it
    assert enforcer.pending() == {}


def test_a_directive_throttles_only_the_pods_this_node_sees_as_best_effort(
    real_cgroup_tree: RealCgroupTree,
):
    """One directive names seven pods; the node's own pods section says which are BE. The
    system, Guaranteed and latency-sensitive Burstable ones keep the kernel's defaults; the
    BestEffort pod and the Burstable pod labelled BE share the quota."""
    tree = real_cgroup_tree
    uids = {name: f"{i:08x}-0000-4000-8000-00000000000{i}" for i, name in enumerate(
        ("be", "batch", "kube-system", "node-critical", "top-priority", "static", "guaranteed",
         "web"), start=1)}  # fmt: skip
    qos = {"guaranteed": "Guaranteed", "web": "Burstable", "batch": "Burstable"}
    dirs = {n: tree.pod(uid, qos.get(n, "BestEffort")) for n, uid in uids.items()}
    pods = [
        pod(uids["be"], "BestEffort", name="be"),
        pod(uids["batch"], "Burstable", 1000, name="batch", labels={"stowage.io/qos": "BE"}),
        pod(uids["kube-system"], "BestEffort", name="kube-proxy", namespace="kube-system"),
        pod(uids["node-critical"], "BestEffort", name="node-exporter",
            priority=2_000_001_000, priority_class="system-node-critical"),
        pod(uids["top-priority"], "BestEffort", name="top", priority=2_000_000_000),
        pod(uids["static"], "BestEffort", name="static-web", static=True),
        pod(uids["guaranteed"], "Guaranteed", 500, name="db", labels={"stowage.io/qos": "BE"}),
        pod(uids["web"], "Burstable", 500, name="web"),
    ]  # fmt: skip
    before = {n: (_cpu(d, "cpu.cfs_quota_us"), _cpu(d, "cpu.shares")) for n, d in dirs.items()}
    clock, metrics = FakeClock(), AgentMetrics()
    enforcer = Enforcer(tree.layout, tree.root.parent / "journal.json", clock)
    d = structs.replace(directive(2000), be_pods=list(uids.values()))
    throttle = BeThrottle(enforcer, clock, lambda: d, tree.layout, metrics=metrics)
    throttle.pods_seen(structs.replace(PODS, pods=pods))
    throttle.directives_arrived()
    after = {n: (_cpu(d, "cpu.cfs_quota_us"), _cpu(d, "cpu.shares")) for n, d in dirs.items()}
    assert _cpu(dirs["be"], "cpu.cfs_period_us") == "100000"
    # 2000 m by requests, of 1002 m: the batch pod's 1000 m gets 199.6 ms a period; the
    # request-less pod's 2 m 0.4 ms, raised to the kernel's least, 1 ms.
    assert after.pop("batch") == ("199600", "2")
    assert after.pop("be") == ("1000", "2")
    assert after == {n: v for n, v in before.items() if n not in ("be", "batch")}
    assert _cpu(tree.layout.pods_dir("besteffort", "cpu"), "cpu.cfs_quota_us") == "-1"
    count = metrics.registry.get_sample_value
    assert count("stowage_agent_directive_refusals_total", {"reason": "system"}) == 4
    assert count("stowage_agent_directive_refusals_total", {"reason": "latency-sensitive"}) == 2
    error = throttle.status().error or ""
    for told in (
        "kube-system/kube-proxy", "namespace kube-system", "priority class system-node-critical",
        "priority 2000000000", "static pod", "ns/db", "Guaranteed", "ns/web",
    ):  # fmt: skip
        assert told in error
    if throttle.watch is not None and "unified" in tree.controllers:
        watched = throttle.watch.spec.paths if throttle.watch.spec is not None else ()
        web = tree.layout.pod_psi_dir("Burstable", uids["web"])
        assert web is not None and web / "cpu.pressure" in watched  # refused: watched as LS
    assert throttle.status().be_cpu_quota_m == 2000
    enforcer.restore_all()
    assert {n: (_cpu(d, "cpu.cfs_quota_us"), _cpu(d, "cpu.shares")) for n, d in dirs.items()} == (
        before
    )


def _cpu(directory: Path, name: str) -> str:
    return (directory / name).read_text().strip()
