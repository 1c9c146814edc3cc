"""The fast path's LS pressure watch: the stall-share arithmetic on fixed samples, and on the
real kernel — a PSI trigger the kernel refuses (EINVAL) and the short-poll fallback that
then runs, a trigger it accepts, both woken by real CPU contention in a pod cgroup."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from agent.pressurewatch import PressureWatch, StallWindow, WatchSpec, try_trigger
from common.clock import SystemClock
from tests.hosts import FakeClock
from tests.realcgroup import RealCgroupTree

LS_UID = "1500ca1e-0000-4000-8000-000000000001"
CAP_SYS_RESOURCE = 24


def test_share_over_a_whole_window_only():
    window = StallWindow(1.0)
    assert window.add(0.0, 0) is None
    assert window.add(0.5, 400_000) is None  # half a window: no decision yet
    assert window.add(1.0, 500_000) == pytest.approx(50.0)
    # The anchor moves: over (0.5, 1.5] the stall is 900k - 400k = 500 ms of 1 s.
    assert window.add(1.5, 900_000) == pytest.approx(50.0)
    assert window.add(2.0, 900_000) == pytest.approx(40.0)  # over (1.0, 2.0]


def test_a_total_going_back_starts_over_and_a_repeat_says_nothing():
    window = StallWindow(1.0)
    window.add(0.0, 5_000_000)
    assert window.add(1.0, 5_000_000) == 0.0
    assert window.add(1.0, 6_000_000) is None  # the same instant twice
    assert window.add(1.1, 10) is None  # recreated cgroup: no share from a fragment
    assert window.add(2.1, 300_010) == pytest.approx(30.0)


def test_share_is_clamped_to_100_percent():
    window = StallWindow(1.0)
    window.add(0.0, 0)
    assert window.add(1.0, 1_050_000) == 100.0  # read jitter past the window


def test_poll_mode_reports_the_pod_over_the_threshold(tmp_path: Path):
    clock = FakeClock()
    quiet, busy = tmp_path / "quiet.pressure", tmp_path / "busy.pressure"
    fired: list[tuple[Path, float]] = []
    watch = PressureWatch(clock, lambda p, s: fired.append((p, s)))
    watch._spec = WatchSpec((quiet, busy, tmp_path / "gone.pressure"), 30.0, 1.0)
    watch.mode = "poll"
    for step, (q, b) in enumerate([(0, 0), (10_000, 200_000), (20_000, 600_000)]):
        quiet.write_text(f"some avg10=0.00 avg60=0.00 avg300=0.00 total={q}\n")
        busy.write_text(f"some avg10=0.00 avg60=0.00 avg300=0.00 total={b}\n")
        watch.poll_once()
        if step < 2:
            clock.advance(0.5)
    assert fired == [(busy, pytest.approx(60.0))]


def _privileged() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


def _ls_pressure(tree: RealCgroupTree) -> tuple[Path, Path]:
    if "unified" not in tree.controllers:
        pytest.skip("no cgroup2 tree on this host: no per-cgroup PSI to watch")
    cpu_dir = tree.pod(LS_UID, "Burstable")
    psi_dir = tree.layout.pod_psi_dir("Burstable", LS_UID)
    assert psi_dir is not None
    return cpu_dir, psi_dir / "cpu.pressure"


def test_one_second_trigger_is_refused_without_cap_sys_resource(real_cgroup_tree):
    _, path = _ls_pressure(real_cgroup_tree)
    fd = try_trigger(path, 300_000, 1_000_000)
    try:
        # The kernel takes sub-2 s windows only from openers holding CAP_SYS_RESOURCE.
        assert (fd is not None) == _privileged()
    finally:
        if fd is not None:
            os.close(fd)


async def _onset_to_breach(tree: RealCgroupTree, window_s: float) -> tuple[str, float, float]:
    """Watch an idle LS pod, then make it contend for CPU; (mode, share, seconds to breach)."""
    cpu_dir, path = _ls_pressure(tree)
    breach = asyncio.Event()
    seen: list[float] = []

    def on_high(where: Path, share: float) -> None:
        assert where == path
        seen.append(share)
        breach.set()

    watch = PressureWatch(SystemClock(), on_high)
    watch.watch(WatchSpec((path,), 30.0, window_s))
    task = asyncio.create_task(watch.run())
    try:
        await asyncio.sleep(window_s)  # a window of calm first, so onset is an onset
        assert not breach.is_set()
        onset = time.monotonic()
        for _ in range(3):  # three spinners on this machine's CPUs: one is always waiting
            tree.busy(cpu_dir)
        await asyncio.wait_for(breach.wait(), 30)
        return watch.mode, seen[0], time.monotonic() - onset
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        watch.close()


async def test_poll_fallback_sees_real_contention_within_a_second_or_so(real_cgroup_tree):
    if _privileged():
        pytest.skip("CAP_SYS_RESOURCE held: a 1 s trigger registers, so no fallback runs")
    mode, share, seconds = await _onset_to_breach(real_cgroup_tree, 1.0)
    assert mode == "poll"
    assert share >= 30.0
    print(f"poll fallback: onset -> breach {seconds * 1000:.0f} ms (share {share:.0f} %)")


async def test_trigger_mode_on_a_window_the_kernel_accepts(real_cgroup_tree):
    # 2 s multiples are open to unprivileged openers since Linux 6.4.
    mode, share, seconds = await _onset_to_breach(real_cgroup_tree, 2.0)
    assert mode == "trigger"
    assert share == 30.0  # a trigger says "crossed", not by how much
    print(f"PSI trigger (2 s window): onset -> event {seconds * 1000:.0f} ms")
