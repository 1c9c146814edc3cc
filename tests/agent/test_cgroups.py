from __future__ import annotations

from pathlib import Path

from agent import cgroups
from tests.hosts import FIXTURES


def test_detects_each_recorded_layout():
    v2 = cgroups.detect(FIXTURES / "k8s-v2-node/sys/fs/cgroup")
    assert (v2.version, v2.driver) == (2, "systemd")
    assert v2.pods_dir("besteffort").name == "kubepods-besteffort.slice"
    assert v2.psi_dir("burstable") == v2.root / "kubepods.slice/kubepods-burstable.slice"
    fs = cgroups.detect(FIXTURES / "two-numa-hugepages/sys/fs/cgroup")
    assert (fs.version, fs.driver) == (2, "cgroupfs")
    v1 = cgroups.detect(FIXTURES / "no-psi-v1/sys/fs/cgroup")
    assert (v1.version, v1.driver, v1.unified) == (1, "cgroupfs", None)
    assert v1.pods_dir("burstable", "cpu") == v1.root / "cpu,cpuacct/kubepods/burstable"
    assert v1.psi_dir() is None
    assert cgroups.detect(FIXTURES / "vm-v1-hybrid/sys/fs/cgroup") is None  # no kubepods


def test_hybrid_host_finds_pressure_in_the_unified_tree(tmp_path: Path):
    root = tmp_path / "cgroup"
    (root / "memory/kubepods.slice").mkdir(parents=True)
    unified = root / "unified"
    (unified / "kubepods.slice").mkdir(parents=True)
    (unified / "cgroup.procs").write_text("")
    (unified / "kubepods.slice/cpu.pressure").write_text("")
    layout = cgroups.detect(root)
    assert (layout.version, layout.driver, layout.unified) == (1, "systemd", unified)
    assert layout.psi_dir() == unified / "kubepods.slice"
    assert layout.psi_dir("besteffort") is None


def test_cpu_quota_from_v2_and_v1_files(tmp_path: Path):
    (tmp_path / "cpu.max").write_text("250000 100000\n")
    assert cgroups.cpu_quota_m(tmp_path, 2) == 2500
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroups.cpu_quota_m(tmp_path, 2) is None
    (tmp_path / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroups.cpu_quota_m(tmp_path, 1) == 500


UID = "1f2e3d4c-0000-4a5b-8c9d-0123456789ab"


def test_pod_paths_as_kubelet_names_them_for_both_drivers():
    assert cgroups.pod_relative("cgroupfs", "Guaranteed", UID) == Path(f"kubepods/pod{UID}")
    assert cgroups.pod_relative("cgroupfs", "BestEffort", UID) == Path(
        f"kubepods/besteffort/pod{UID}"
    )
    under = UID.replace("-", "_")
    assert cgroups.pod_relative("systemd", "Burstable", UID) == Path(
        f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{under}.slice"
    )
    assert cgroups.pod_relative("systemd", "Guaranteed", UID) == Path(
        f"kubepods.slice/kubepods-pod{under}.slice"
    )
    hybrid = cgroups.CgroupLayout(1, "cgroupfs", Path("/cg"), Path("/cg/unified"))
    assert hybrid.pod_dir("Burstable", UID, "cpuacct") == Path(
        f"/cg/cpuacct/kubepods/burstable/pod{UID}"
    )
    assert hybrid.pod_psi_dir("Burstable", UID) == Path(f"/cg/unified/kubepods/burstable/pod{UID}")
    assert (
        cgroups.CgroupLayout(1, "cgroupfs", Path("/cg"), None).pod_psi_dir("Burstable", UID) is None
    )


def test_a_uid_with_path_characters_names_no_directory():
    layout = cgroups.CgroupLayout(2, "cgroupfs", Path("/cg"), Path("/cg"))
    for bad in ("../../etc", "a/b", "..", "", "abc_def", "x" * 10, "a" * 65, "ab\n"):
        assert cgroups.pod_relative("cgroupfs", "Burstable", bad) is None, bad
        assert layout.pod_dir("Burstable", bad) is None
        assert layout.pod_psi_dir("Burstable", bad) is None
