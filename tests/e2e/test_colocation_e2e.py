"""Colocation end to end on the real kernel.

A kubepods tree in the machine's real cgroup hierarchies (v1 ``cpu`` limits, ``cpuacct``
measures, the cgroup2 tree carries per-cgroup PSI), a "BE pod" spinning and an "LS pod"
running a 50 % duty cycle, both pinned to one CPU so they really contend, and the real
``stowage coordinator --standalone`` and ``stowage agent`` processes. Every figure asserted
comes from the kernel: the quota from ``cpu.cfs_quota_us``, CPU use from ``cpuacct.usage``
deltas, the LS pod's stall from its ``cpu.pressure`` ``some total`` delta.

The measuring windows are wall time because what is measured is what the kernel let each
pod run over wall time; every wait for a change polls the kernel file until it changes.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hack.bench import colocation_rig as rig
from tests.kit import until
from tests.realcgroup import RealCgroupTree

WINDOW_S = 3.0
"""Each measuring window: 375 LS duty cycles, 30 bandwidth periods."""
INTERVAL_S = 0.5
"""The agent's report interval."""
TTL_S = 3.0
"""The directive TTL the coordinator gives, and its report TTL."""
HIGH_PCT = 5.0
"""LS stall (``some`` avg10, %) at which the coordinator tightens in these runs: the first
2 s PSI update after the onset of a ~40 % stall crosses it."""
FLOOR_M = 200
"""The BE quota the coordinator tightens to (a fifth of the contended CPU)."""
THROTTLE_WITHIN_S = 20.0
"""Bound on waiting for a throttle: PSI's avg10 needs a few of its 2 s updates to climb."""
RELAXING = (0.5, 4.0, False)
"""Release test: relax after 0.5 s at or below 4 % (throttled, LS still stalls ~3 %)."""
LOCAL_WITHIN_S = 5.0
"""Bound on waiting for the agent's own tightening (its target: under 1 s from onset)."""
LOCAL_ONLY = (600.0, 1.0, True)
"""Fast-path test: local bounds, no relaxing, a coordinator too slow to act first."""
RELEASE_WITHIN_S = 30.0
"""Bound on a full release in bounded relaxing steps."""
UNLIMITED = -1

pytestmark = pytest.mark.skipif(rig.unavailable() is not None, reason=str(rig.unavailable()))


def coordinator_config(
    relax_after_s: float, low_pct: float, *, local: bool = False
) -> dict[str, object]:
    """Settings that let a short run see every transition: the coordinator alone decides
    (no local bounds), tightens once LS stall reaches ``HIGH_PCT`` straight to the floor
    (``FLOOR_M``: a factor of 0.1 from BE's measured use lands below it), and relaxes all
    the way in one step after ``relax_after_s`` at or below ``low_pct``. With ``local``
    the agent may tighten alone (over a 0.5 s window, held for a minute) and the
    coordinator waits ten minutes before it would."""
    return {
        "signals": {"report_ttl_s": TTL_S},
        "ingest": {"directive_ttl_s": TTL_S},
        "colocation": {
            "default": {
                "pressure_high_pct": HIGH_PCT,
                "tighten_after_s": 0.1,
                "tighten_factor": 0.1,
                "floor_pct": 1.0,
                "floor_min_m": FLOOR_M,
                "pressure_low_pct": low_pct,
                "relax_after_s": relax_after_s,
                "relax_step_pct": 100.0,
                "local": local,
                "local_window_s": 0.5,
                "local_hold_s": 60.0,
                **({"tighten_after_s": 600.0} if local else {}),
            }
        },
    }


@dataclass
class Node:
    """The running pieces of one run."""

    tree: RealCgroupTree
    stack: rig.Stack
    workers: rig.Workers
    be: rig.Pod
    ls: rig.Pod
    cpu: int
    before_inside: dict[str, str]
    before_outside: dict[str, str]

    def start_ls(self) -> None:
        self.workers.spawn(self.ls, rig.LS_CODE, self.cpu)

    def start_agent(self) -> None:
        self.stack.start_agent(self.tree.root, interval_s=INTERVAL_S)

    def meter(self) -> rig.Meter:
        return rig.Meter([self.be, self.ls])

    def decided_quota_m(self) -> float | None:
        """The BE quota the coordinator decided for the node now."""
        quota: float | None = self.stack.colocation()["be_cpu_quota_m"]
        return quota

    def throttled(self) -> int | None:
        quota = self.be.quota_us()
        return quota if quota != UNLIMITED else None

    def inside(self) -> dict[str, str]:
        return rig.snapshot(self.tree.real_path("cpu", "kubepods"))

    def outside(self) -> dict[str, str]:
        return rig.snapshot(skip=kubepods(self.tree))


def kubepods(tree: RealCgroupTree) -> tuple[Path, ...]:
    """The private kubepods trees, the only places the agent may write."""
    return tuple(tree.real_path(c, "kubepods") for c in tree.controllers)


def pod(tree: RealCgroupTree, uid: str) -> rig.Pod:
    cpu_dir = tree.pod(uid, "Burstable")
    relative = cpu_dir.relative_to(tree.root / "cpu")
    return rig.Pod(uid, {c: tree.real_path(c, relative) for c in tree.controllers})


@pytest.fixture
def node(
    real_cgroup_tree: RealCgroupTree, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Node]:
    """Coordinator, pods in the emulator and in cgroups, BE spinning; LS and the agent not
    started. ``(relax_after_s, low_pct, local)`` from an indirect parameter (default: no
    relaxing within a run, no local bounds).
    Processes are stopped here, the cgroups by the tree's fixture."""
    tree = real_cgroup_tree
    if not {"cpuacct", "unified"} <= set(tree.controllers):
        pytest.skip("needs the cpuacct and cgroup2 (PSI) hierarchies beside the cpu one")
    stack, workers = rig.Stack(tmp_path), rig.Workers()
    try:
        relax_after_s, low_pct, local = getattr(request, "param", (600.0, 1.0, False))
        stack.start_coordinator(coordinator_config(relax_after_s, low_pct, local=local))
        be = pod(tree, stack.add_pod("batch", qos_label="BE", cpu_request="1"))
        ls = pod(tree, stack.add_pod("web", qos_label="LS", cpu_request="1"))
        # The pods' share of the CPU against this machine's other work, as kubelet weighs
        # kubepods against system daemons (shares from the node's CPU): what the test
        # watches is BE against LS, not both against whatever else runs here.
        (tree.real_path("cpu", "") / "cpu.shares").write_text(str(rig.TREE_SHARES))
        cpu = rig.contended_cpu()
        before_inside = rig.snapshot(tree.real_path("cpu", "kubepods"))
        before_outside = rig.snapshot(skip=kubepods(tree))
        workers.spawn(be, rig.BE_CODE, cpu)
        yield Node(tree, stack, workers, be, ls, cpu, before_inside, before_outside)
    finally:
        stack.close()
        workers.close()


def test_ls_stall_throttles_be_to_its_quota_and_sigterm_restores_every_value(node: Node) -> None:
    node.start_ls()
    contended = node.meter().measure(WINDOW_S)
    assert contended.stall_pct[node.ls.uid] >= 2 * HIGH_PCT, contended  # real contention
    node.start_agent()

    quota_us = until(node.throttled, "the BE pod's cpu.cfs_quota_us set", THROTTLE_WITHIN_S)
    period_us = int(node.be.read("cpu", "cpu.cfs_period_us"))
    quota_m = quota_us * 1000 / period_us
    assert quota_m == node.decided_quota_m()  # the coordinator's decision, exactly
    assert node.be.shares() == 2  # BE yields to LS while throttled, as the seed runs it

    throttled = node.meter().measure(WINDOW_S)
    assert abs(throttled.cpu_m[node.be.uid] - quota_m) <= 0.10 * quota_m, throttled
    # LS recovers: it stalls less and runs more (measured: about 33 % to 4 %, 330 m to 450 m).
    ls_before, ls_after = contended.of(node.ls.uid), throttled.of(node.ls.uid)
    assert ls_after.stall_pct <= 0.5 * ls_before.stall_pct, (contended, throttled)
    assert ls_after.cpu_m >= 1.2 * ls_before.cpu_m, (contended, throttled)

    assert node.stack.stop(node.stack.agent, signal.SIGTERM) == 0, node.stack.agent_log.text()
    assert node.inside() == node.before_inside  # every value the enforcer changed is back
    assert node.decided_quota_m() == quota_m  # restored by the agent, not released upstream
    assert rig.changed(node.before_outside, node.outside()) == {}


@pytest.mark.slow
@pytest.mark.parametrize("node", [RELAXING], indirect=True)
def test_throttle_released_after_the_pressure_ends(node: Node) -> None:
    node.start_ls()
    node.start_agent()
    until(node.throttled, "the BE pod throttled", THROTTLE_WITHIN_S)
    node.workers.kill(node.ls)  # the LS load, and its stall, end

    until(lambda: node.inside() == node.before_inside, "every value back", RELEASE_WITHIN_S)
    assert node.decided_quota_m() is None  # released by the coordinator: the node is fresh
    assert rig.changed(node.before_outside, node.outside()) == {}


@pytest.mark.slow
def test_coordinator_killed_mid_throttle_releases_it_within_the_ttl(node: Node) -> None:
    node.start_ls()
    node.start_agent()
    until(node.throttled, "the BE pod throttled", THROTTLE_WITHIN_S)
    node.stack.coordinator_process().kill()
    assert node.throttled()  # the last directive stands until its TTL ...

    # ... and not much longer: the TTL counts from the last directive heard, at most one
    # interval before the kill; one more interval for the agent to notice.
    until(lambda: node.inside() == node.before_inside, "released", TTL_S + 2 * INTERVAL_S)
    assert rig.changed(node.before_outside, node.outside()) == {}


def test_sigkilled_agent_restores_every_value_it_changed_when_restarted(node: Node) -> None:
    node.start_ls()
    node.start_agent()
    until(node.throttled, "the BE pod throttled", THROTTLE_WITHIN_S)
    throttled = node.inside()
    node.stack.agent_process().kill()
    node.stack.agent_process().wait(10)
    assert node.inside() == throttled  # a SIGKILL restores nothing
    # No directive can reach the restarted agent: what it restores, it read from its journal.
    node.stack.coordinator_process().kill()

    node.start_agent()
    until(lambda: node.inside() == node.before_inside, "restored on start-up", 10.0)
    assert rig.changed(node.before_outside, node.outside()) == {}


@pytest.mark.parametrize("node", [LOCAL_ONLY], indirect=True)
def test_agent_tightens_alone_within_its_bounds_when_ls_stalls(node: Node) -> None:
    node.start_agent()
    until(lambda: node.stack.reports_accepted() >= 2, "the agent's reports accepted")
    node.start_ls()

    quota_us = until(node.throttled, "the BE pod throttled by the agent", LOCAL_WITHIN_S)
    assert node.decided_quota_m() is None  # the coordinator has not throttled: the agent did

    def applied() -> dict[str, object] | None:
        facts = node.stack.colocation()["facts"]
        return (
            facts["agent_applied"]
            if facts and facts["agent_applied"]["source"] == "local"
            else None
        )

    reported = until(applied, "the local tightening reported")
    assert reported["be_cpu_quota_m"] * rig.PERIOD_US // 1000 == quota_us
    assert reported["local_actions"] >= 1
