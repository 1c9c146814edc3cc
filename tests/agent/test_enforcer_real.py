"""The enforcer on this machine's real cgroup v1 cpu controller (see tests/realcgroup.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.enforcer import BePod, Enforcer
from tests.hosts import FakeClock
from tests.kit import until
from tests.realcgroup import CGROUP_ROOT, RealCgroupTree

UID_BE = "0b5c1a7e-1111-4c2d-9e0f-000000000001"
UID_OTHER = "0b5c1a7e-2222-4c2d-9e0f-000000000002"


def test_fixture_builds_a_real_tree_and_removes_it(tmp_path: Path):
    tree = RealCgroupTree(tmp_path)
    try:
        tree.build()
        pod = tree.pod(UID_BE)
        proc = tree.busy(pod)
        real = tree.real_path("cpu", pod.relative_to(tree.root / "cpu"))
        assert str(proc.pid) in (real / "cgroup.procs").read_text().split()
        assert (real / "cpu.cfs_quota_us").read_text().strip() == "-1"
        assert tree.layout.pods_dir("besteffort", "cpu") == tree.root / "cpu/kubepods/besteffort"
    finally:
        tree.cleanup()
    assert not (CGROUP_ROOT / "cpu" / tree.name).exists()
    assert proc.poll() is not None


def _kernel(tree: RealCgroupTree, cpu_dir: Path, name: str) -> str:
    """A file as the kernel shows it at its real path (not through the layout's links)."""
    return (
        (tree.real_path("cpu", cpu_dir.relative_to(tree.root / "cpu")) / name).read_text().strip()
    )


@pytest.mark.parametrize("real_cgroup_tree", ["cgroupfs", "systemd"], indirect=True)
def test_parent_quota_applied_and_restored_on_the_real_controller(
    real_cgroup_tree: RealCgroupTree, tmp_path: Path, clock: FakeClock
):
    tree = real_cgroup_tree
    tree.pod(UID_BE)
    parent = tree.layout.pods_dir("besteffort", "cpu")
    enforcer = Enforcer(tree.layout, tmp_path / "journal.json", clock)
    applied = enforcer.apply(250, [BePod(UID_BE, "BestEffort", 0)])
    assert (applied.mode, applied.error) == ("parent", None)
    assert (_kernel(tree, parent, "cpu.cfs_quota_us"), _kernel(tree, parent, "cpu.shares")) == (
        "25000",
        "2",
    )
    enforcer.restore_all()
    assert (_kernel(tree, parent, "cpu.cfs_quota_us"), _kernel(tree, parent, "cpu.shares")) == (
        "-1",
        "1024",
    )


def test_container_limits_above_the_quota_follow_it_in_a_kernel_valid_order(
    real_cgroup_tree: RealCgroupTree, tmp_path: Path, clock: FakeClock
):
    """v1 refuses a pod quota below a child's (EINVAL); the enforcer lowers children first,
    raises parents first, and restores in the same discipline."""
    tree = real_cgroup_tree
    pod = tree.pod(UID_BE, "Burstable")
    container = tree.mkdir(str(pod.relative_to(tree.root / "cpu") / "container"))
    (pod / "cpu.cfs_quota_us").write_text("200000")
    (container / "cpu.cfs_quota_us").write_text("150000")
    enforcer = Enforcer(tree.layout, tmp_path / "journal.json", clock)
    pods = [BePod(UID_BE, "Burstable", 500)]
    assert enforcer.apply(300, pods).error is None
    assert [_kernel(tree, d, "cpu.cfs_quota_us") for d in (pod, container)] == ["30000", "30000"]
    assert enforcer.apply(1000, pods).error is None
    assert [_kernel(tree, d, "cpu.cfs_quota_us") for d in (pod, container)] == ["100000", "100000"]
    assert enforcer.apply(100, pods).error is None
    assert enforcer.restore_all().error is None
    assert [_kernel(tree, d, "cpu.cfs_quota_us") for d in (pod, container)] == ["200000", "150000"]
    assert [_kernel(tree, d, "cpu.shares") for d in (pod, container)] == ["1024", "1024"]


def _cpu_ticks(pid: int) -> int:
    """utime + stime of a process, in clock ticks (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _cpu_stat(tree: RealCgroupTree, cpu_dir: Path) -> dict[str, int]:
    text = _kernel(tree, cpu_dir, "cpu.stat")
    return {k: int(v) for k, v in (line.split() for line in text.splitlines())}


def test_a_busy_be_process_falls_to_the_quota(
    real_cgroup_tree: RealCgroupTree, tmp_path: Path, clock: FakeClock
):
    """The share is CPU time over the CFS periods the kernel counted while the group ran, so
    no wall clock enters the assertion."""
    tree = real_cgroup_tree
    pod = tree.pod(UID_BE)
    proc = tree.busy(pod)
    hz = os.sysconf("SC_CLK_TCK")
    start, t0 = _cpu_ticks(proc.pid), time.monotonic()
    until(lambda: _cpu_ticks(proc.pid) - start >= hz // 2, "the busy process to run 0.5 s", 60)
    unthrottled = (_cpu_ticks(proc.pid) - start) / hz / (time.monotonic() - t0)
    enforcer = Enforcer(tree.layout, tmp_path / "journal.json", clock)
    quota_m = 300
    assert enforcer.apply(quota_m, [BePod(UID_BE, "BestEffort", 0)]).error is None
    parent = tree.layout.pods_dir("besteffort", "cpu")
    stat0, ticks0 = _cpu_stat(tree, parent), _cpu_ticks(proc.pid)
    until(
        lambda: _cpu_stat(tree, parent)["nr_periods"] - stat0["nr_periods"] >= 30, "30 periods", 60
    )
    stat1, ticks1 = _cpu_stat(tree, parent), _cpu_ticks(proc.pid)
    periods = stat1["nr_periods"] - stat0["nr_periods"]
    period_s = int(_kernel(tree, parent, "cpu.cfs_period_us")) / 1e6
    share = (ticks1 - ticks0) / hz / (periods * period_s)
    print(f"busy BE process: {unthrottled:.2f} CPU unthrottled, {share:.3f} under {quota_m} m")
    assert stat1["nr_throttled"] > stat0["nr_throttled"]
    assert abs(share - quota_m / 1000) <= 0.1 * quota_m / 1000
    assert unthrottled > 1.1 * quota_m / 1000
    enforcer.restore_all()
    assert _kernel(tree, parent, "cpu.cfs_quota_us") == "-1"


_CRASHING_AGENT = """
import sys, time
from pathlib import Path
from agent import cgroups
from agent.enforcer import BePod, Enforcer
from common.clock import SystemClock
root, journal, be, other = sys.argv[1:]
enforcer = Enforcer(cgroups.detect(Path(root)), Path(journal), SystemClock())
a = enforcer.apply(400, [BePod(be, "Burstable", 100), BePod(other, "BestEffort", 0)])
print(a.error or a.mode, flush=True)
time.sleep(600)
"""


def test_recover_after_sigkill_restores_every_original(
    real_cgroup_tree: RealCgroupTree, tmp_path: Path, clock: FakeClock
):
    tree = real_cgroup_tree
    pods = [tree.pod(UID_BE, "Burstable"), tree.pod(UID_OTHER, "BestEffort")]
    (pods[0] / "cpu.cfs_quota_us").write_text("150000")
    (pods[0] / "cpu.shares").write_text("512")
    files = [d / n for d in pods for n in ("cpu.cfs_quota_us", "cpu.shares")]
    before = {f: _kernel(tree, f.parent, f.name) for f in files}
    journal = tmp_path / "state" / "journal.json"
    agent = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_AGENT, str(tree.root), str(journal), UID_BE, UID_OTHER],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert agent.stdout is not None
        assert agent.stdout.readline().strip() == "pods"
        during = {f: _kernel(tree, f.parent, f.name) for f in files}
        assert during != before
        agent.send_signal(signal.SIGKILL)
    finally:
        agent.kill()
        agent.wait()
        if agent.stdout is not None:
            agent.stdout.close()
    fresh = Enforcer(tree.layout, journal, clock)
    assert len(fresh.pending()) == 4
    assert fresh.recover().error is None
    assert {f: _kernel(tree, f.parent, f.name) for f in files} == before
    assert not journal.exists()
