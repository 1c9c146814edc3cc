"""The enforcer on this machine's real cgroup v1 cpu controller (see tests/realcgroup.py)."""

from __future__ import annotations

from pathlib import Path

from tests.realcgroup import CGROUP_ROOT, RealCgroupTree

UID_BE = "0b5c1a7e-1111-4c2d-9e0f-000000000001"


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
