"""Per-pod CPU use and stall from the pod cgroups, on written trees driven by a fake clock
and on the real kernel's cgroups (cpuacct and the cgroup2 tree) with a busy process."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.podusage import PodUsageSampler
from common.schema import PodInfo, PodUsage, Resources
from tests.hosts import FakeClock

UID_A = "aaaaaaaa-0000-4000-8000-000000000001"
UID_B = "bbbbbbbb-0000-4000-8000-000000000002"


def pod(uid: str, qos: str = "Burstable") -> PodInfo:
    none = Resources(cpu_m=0, mem_b=0, gpu=0, hugepages_b=0, extended={})
    return PodInfo(
        namespace="ns",
        name=f"p-{uid[:4]}",
        uid=uid,
        phase="Running",
        qos_class=qos,
        priority=0,
        priority_class=None,
        requests=none,
        limits=none,
        labels={},
    )


def usage_of(sampled: dict[str, PodUsage] | None) -> PodUsage | None:
    """Pod A's entry of one sample."""
    assert sampled is not None  # a kubepods tree was found
    return sampled.get(UID_A)


def pressure(avg10: float, total: int) -> str:
    return (
        f"some avg10={avg10:.2f} avg60=0.00 avg300=0.00 total={total}\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )


def v2_tree(root: Path) -> Path:
    (root / "cgroup.controllers").write_text("cpu memory\n")
    pod_dir = root / f"kubepods/burstable/pod{UID_A}"
    pod_dir.mkdir(parents=True)
    return pod_dir


def test_v2_usage_and_stall_from_deltas_first_sample_none(tmp_path: Path):
    clock = FakeClock()
    pod_dir = v2_tree(tmp_path)
    (pod_dir / "cpu.stat").write_text("usage_usec 1000000\nuser_usec 900000\n")
    (pod_dir / "cpu.pressure").write_text(pressure(12.5, 5_000_000))
    sampler = PodUsageSampler(tmp_path, clock)
    first = sampler.sample([pod(UID_A), pod(UID_B)])
    assert first is not None
    assert list(first) == [UID_A]  # B has no cgroup (pending or gone): no entry at all
    assert (first[UID_A].cpu_m, first[UID_A].cpu_some_rate_pct) == (None, None)
    assert first[UID_A].cpu_some_avg10_pct == 12.5
    clock.advance(2.0)
    # 2 s later: 1.5 s of CPU (750 m) and 0.6 s of stall (30 %).
    (pod_dir / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    (pod_dir / "cpu.pressure").write_text(pressure(20.0, 5_600_000))
    usage = usage_of(sampler.sample([pod(UID_A)]))
    assert usage is not None
    assert usage.cpu_m == 750
    assert usage.cpu_some_rate_pct == pytest.approx(30.0)
    assert usage.cpu_some_avg10_pct == 20.0


def test_a_counter_going_back_starts_a_new_baseline(tmp_path: Path):
    clock = FakeClock()
    pod_dir = v2_tree(tmp_path)
    (pod_dir / "cpu.stat").write_text("usage_usec 9000000\n")
    (pod_dir / "cpu.pressure").write_text(pressure(0, 9_000_000))
    sampler = PodUsageSampler(tmp_path, clock)
    sampler.sample([pod(UID_A)])
    clock.advance(1.0)
    (pod_dir / "cpu.stat").write_text("usage_usec 100\n")  # cgroup recreated
    (pod_dir / "cpu.pressure").write_text(pressure(0, 50))
    usage = usage_of(sampler.sample([pod(UID_A)]))
    assert usage is not None
    assert (usage.cpu_m, usage.cpu_some_rate_pct) == (None, None)
    clock.advance(1.0)
    (pod_dir / "cpu.stat").write_text("usage_usec 200100\n")
    usage = usage_of(sampler.sample([pod(UID_A)]))
    assert usage is not None and usage.cpu_m == 200


def test_a_pod_gone_for_a_cycle_has_no_stale_baseline(tmp_path: Path):
    clock = FakeClock()
    pod_dir = v2_tree(tmp_path)
    (pod_dir / "cpu.stat").write_text("usage_usec 1000\n")
    sampler = PodUsageSampler(tmp_path, clock)
    sampler.sample([pod(UID_A)])
    clock.advance(1.0)
    sampler.sample([])  # the pod left the list
    clock.advance(1.0)
    (pod_dir / "cpu.stat").write_text("usage_usec 2001000\n")
    usage = usage_of(sampler.sample([pod(UID_A)]))
    assert usage is not None and usage.cpu_m is None


def test_v1_hybrid_reads_cpuacct_and_the_unified_pressure(tmp_path: Path):
    clock = FakeClock()
    slice_name = f"kubepods-besteffort-pod{UID_A.replace('-', '_')}.slice"
    cpuacct = tmp_path / "cpu,cpuacct/kubepods.slice/kubepods-besteffort.slice" / slice_name
    cpuacct.mkdir(parents=True)
    unified = tmp_path / "unified"
    psi = unified / cpuacct.relative_to(tmp_path / "cpu,cpuacct")
    psi.mkdir(parents=True)
    (unified / "cgroup.procs").write_text("")
    (cpuacct / "cpuacct.usage").write_text("4000000000\n")  # ns
    (psi / "cpu.pressure").write_text(pressure(1.0, 0))
    sampler = PodUsageSampler(tmp_path, clock)
    sampler.sample([pod(UID_A, "BestEffort")])
    clock.advance(4.0)
    (cpuacct / "cpuacct.usage").write_text("6000000000\n")
    (psi / "cpu.pressure").write_text(pressure(3.0, 400_000))
    usage = usage_of(sampler.sample([pod(UID_A, "BestEffort")]))
    assert usage is not None
    assert usage.cpu_m == 500
    assert usage.cpu_some_rate_pct == pytest.approx(10.0)


def test_pure_v1_has_usage_but_no_pressure(tmp_path: Path):
    clock = FakeClock()
    cpuacct = tmp_path / f"cpuacct/kubepods/pod{UID_A}"
    cpuacct.mkdir(parents=True)
    (tmp_path / "memory/kubepods").mkdir(parents=True)  # where detection looks on v1
    (cpuacct / "cpuacct.usage").write_text("0\n")
    sampler = PodUsageSampler(tmp_path, clock)
    usage = usage_of(sampler.sample([pod(UID_A, "Guaranteed")]))
    assert usage is not None
    assert (usage.cpu_some_avg10_pct, usage.cpu_some_rate_pct) == (None, None)


def test_without_a_kubepods_tree_nothing_is_measured(tmp_path: Path):
    assert PodUsageSampler(tmp_path, FakeClock()).sample([pod(UID_A)]) is None


# ------------------------------------------------------------------ real kernel

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
UNIFIED = Path("/sys/fs/cgroup/unified")


def _writable(path: Path) -> bool:
    return (path / "cgroup.procs").exists() and os.access(path / "cgroup.procs", os.W_OK)


@pytest.fixture
def real_pod_cgroups(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """A private ``kubepods/burstable/pod<uid>`` under the real cpuacct and cgroup2 trees,
    seen through ``tmp_path`` as a cgroup root; removed again whatever happens."""
    if not _writable(CPUACCT) or not _writable(UNIFIED):
        pytest.skip("needs writable cgroup v1 cpuacct and cgroup2 (unified) hierarchies")
    name = f"stowage-podusage-{uuid.uuid4().hex[:8]}"
    made: list[tuple[Path, Path]] = []
    leaf = Path(f"kubepods/burstable/pod{UID_A}")
    try:
        for base in (CPUACCT, UNIFIED):
            top = base / name
            for part in (top, top / "kubepods", top / "kubepods/burstable", top / leaf):
                part.mkdir()
                made.append((base, part))
            (tmp_path / base.name).symlink_to(top)
        yield tmp_path, CPUACCT / name / leaf, UNIFIED / name / leaf
    finally:
        for base, directory in reversed(made):
            for pid in (directory / "cgroup.procs").read_text().split():
                (base / "cgroup.procs").write_text(pid)  # back to the root, then remove
            directory.rmdir()


def test_real_cgroup_usage_of_a_busy_process(real_pod_cgroups: tuple[Path, Path, Path]):
    root, cpuacct, unified = real_pod_cgroups
    clock = FakeClock()
    sampler = PodUsageSampler(root, clock)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for directory in (cpuacct, unified):
            (directory / "cgroup.procs").write_text(str(busy.pid))
        start = int((cpuacct / "cpuacct.usage").read_text())
        first = usage_of(sampler.sample([pod(UID_A)]))
        assert first is not None and first.cpu_m is None
        assert first.cpu_some_avg10_pct is not None  # the cgroup2 tree keeps per-cgroup PSI
        # Wait on the kernel's counter, not on time: ~0.3 s of CPU used.
        while int((cpuacct / "cpuacct.usage").read_text()) - start < 300_000_000:
            os.sched_yield()
        used_ns = int((cpuacct / "cpuacct.usage").read_text()) - start
        clock.advance(used_ns / 1e9)  # one CPU's worth over the fake interval
        usage = usage_of(sampler.sample([pod(UID_A)]))
        assert usage is not None and usage.cpu_m is not None
        assert 900 <= usage.cpu_m <= 1200
    finally:
        busy.kill()
        busy.wait()
