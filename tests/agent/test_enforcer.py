"""The enforcer's planning, journal and refusals, on written cgroup trees (v1 and v2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent import cgroups
from agent import enforcer as enforcer_module
from agent.enforcer import BePod, Enforcer
from agent.journal import JournalBusyError
from tests.hosts import FakeClock

UID_A = "aaaaaaaa-0000-4000-8000-000000000001"
UID_B = "bbbbbbbb-0000-4000-8000-000000000002"
UID_SYS = "cccccccc-0000-4000-8000-000000000003"


def _cgroup(path: Path, v2: bool) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    files = {"cpu.max": "max 100000\n", "cpu.weight": "100\n"} if v2 else {}
    files = files or {"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"}
    files.setdefault("cpu.shares", "1024\n")
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def _tree(tmp: Path, v2: bool = False, driver: str = "cgroupfs") -> cgroups.CgroupLayout:
    root = tmp / "cgroup"
    base = root if v2 else root / "cpu"
    if v2:
        root.mkdir()
        (root / "cgroup.controllers").write_text("cpu memory\n")
    names = (
        ("kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice")
        if driver == "systemd"
        else ("kubepods", "burstable", "besteffort")
    )
    _cgroup(base / names[0], v2)
    for qos in names[1:]:
        _cgroup(base / names[0] / qos, v2)
    layout = cgroups.detect(root)
    assert layout is not None
    return layout


def _pod(layout: cgroups.CgroupLayout, uid: str, qos_class: str, v2: bool = False) -> Path:
    path = layout.pod_dir(qos_class, uid, "cpu")
    assert path is not None
    return _cgroup(path, v2)


def _text(path: Path) -> str:
    return path.read_text().strip()


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p): p.read_text() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def v1(tmp_path: Path) -> cgroups.CgroupLayout:
    return _tree(tmp_path)


def test_all_be_pods_in_the_besteffort_cgroup_get_one_quota_there(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    _pod(v1, UID_A, "BestEffort")
    _pod(v1, UID_B, "BestEffort")
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    pods = [BePod(UID_A, "BestEffort", 0), BePod(UID_B, "BestEffort", 0)]
    applied = enforcer.apply(1500, pods)
    parent = v1.pods_dir("besteffort", "cpu")
    assert (applied.mode, applied.targets, applied.written) == ("parent", ("besteffort",), 2)
    assert _text(parent / "cpu.cfs_quota_us") == "150000"
    assert _text(parent / "cpu.shares") == "2"
    assert _text(v1.pod_dir("BestEffort", UID_A) / "cpu.cfs_quota_us") == "-1"
    status = enforcer.current()
    assert (status.be_cpu_quota_m, status.source, status.applied_at) == (
        1500,
        "coordinator",
        clock.wall(),
    )
    assert enforcer.apply(1500, pods).written == 0  # idempotent


def test_a_pod_not_named_be_under_the_besteffort_cgroup_moves_the_quota_to_the_pods(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    _pod(v1, UID_A, "BestEffort")
    system = _pod(v1, UID_SYS, "BestEffort")  # e.g. a kube-system pod: never BE
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    applied = enforcer.apply(500, [BePod(UID_A, "BestEffort", 0)])
    assert applied.mode == "pods"
    assert _text(v1.pod_dir("BestEffort", UID_A) / "cpu.cfs_quota_us") == "50000"
    assert _text(system / "cpu.cfs_quota_us") == "-1"
    assert _text(v1.pods_dir("besteffort", "cpu") / "cpu.cfs_quota_us") == "-1"


def test_the_quota_is_shared_by_requests_with_a_floor_per_pod(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    a = _pod(v1, UID_A, "Burstable")
    b = _pod(v1, UID_B, "Burstable")
    c = _pod(v1, UID_SYS, "BestEffort")
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    pods = [
        BePod(UID_A, "Burstable", 3000),
        BePod(UID_B, "Burstable", 998),
        BePod(UID_SYS, "BestEffort", 0),
    ]
    applied = enforcer.apply(2000, pods)
    assert applied.mode == "pods"
    # 2000 m × 3000/4000 = 1500 m; × 998/4000 = 499 m; the request-less pod weighs 2 m:
    # 1 m, raised to the kernel's 1 ms per 100 ms period.
    assert [_text(p / "cpu.cfs_quota_us") for p in (a, b, c)] == ["150000", "49900", "1000"]
    assert [_text(p / "cpu.shares") for p in (a, b, c)] == ["2", "2", "2"]


def test_v2_writes_cpu_max_with_the_cgroups_own_period_and_weight(tmp_path: Path, clock: FakeClock):
    layout = _tree(tmp_path, v2=True, driver="systemd")
    pod = _pod(layout, UID_A, "Burstable", v2=True)
    (pod / "cpu.max").write_text("max 50000\n")
    enforcer = Enforcer(layout, tmp_path / "journal.json", clock)
    enforcer.apply(250, [BePod(UID_A, "Burstable", 100)])
    assert pod.name == f"kubepods-burstable-pod{UID_A.replace('-', '_')}.slice"
    assert (_text(pod / "cpu.max"), _text(pod / "cpu.weight")) == ("12500 50000", "1")
    enforcer.restore_all()
    assert (_text(pod / "cpu.max"), _text(pod / "cpu.weight")) == ("max 50000", "100")


def test_v1_children_with_a_higher_limit_are_lowered_and_restored(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    pod = _pod(v1, UID_A, "Burstable")
    (pod / "cpu.cfs_quota_us").write_text("200000\n")
    high = _cgroup(pod / "container-high", v2=False)
    (high / "cpu.cfs_quota_us").write_text("150000\n")
    low = _cgroup(pod / "container-low", v2=False)
    (low / "cpu.cfs_quota_us").write_text("20000\n")
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    enforcer.apply(500, [BePod(UID_A, "Burstable", 100)])
    assert [_text(p / "cpu.cfs_quota_us") for p in (pod, high, low)] == ["50000", "50000", "20000"]
    enforcer.apply(1000, [BePod(UID_A, "Burstable", 100)])  # relaxing keeps the clamp in step
    assert [_text(p / "cpu.cfs_quota_us") for p in (pod, high, low)] == [
        "100000",
        "100000",
        "20000",
    ]
    enforcer.restore_all()
    assert [_text(p / "cpu.cfs_quota_us") for p in (pod, high, low)] == [
        "200000",
        "150000",
        "20000",
    ]
    assert not (tmp_path / "journal.json").exists()


def test_restore_puts_back_every_original_and_empties_the_journal(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    _pod(v1, UID_A, "BestEffort")
    _pod(v1, UID_B, "Burstable")
    before = _snapshot(tmp_path / "cgroup")
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    enforcer.apply(800, [BePod(UID_A, "BestEffort", 0), BePod(UID_B, "Burstable", 500)])
    assert _snapshot(tmp_path / "cgroup") != before
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["originals"][str(v1.pod_dir("Burstable", UID_B) / "cpu.shares")] == "1024\n"
    restored = enforcer.restore_all()
    assert restored.quota_m is None and restored.written == 4
    assert _snapshot(tmp_path / "cgroup") == before
    assert not (tmp_path / "journal.json").exists()
    assert enforcer.current().source == "default"


def test_moving_from_the_parent_to_the_pods_restores_the_parent(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    _pod(v1, UID_A, "BestEffort")
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    assert enforcer.apply(500, [BePod(UID_A, "BestEffort", 0)]).mode == "parent"
    _pod(v1, UID_SYS, "BestEffort")  # a pod the coordinator did not name BE arrives
    assert enforcer.apply(500, [BePod(UID_A, "BestEffort", 0)]).mode == "pods"
    parent = v1.pods_dir("besteffort", "cpu")
    assert (_text(parent / "cpu.cfs_quota_us"), _text(parent / "cpu.shares")) == ("-1", "1024")
    assert set(enforcer.pending()) == {
        str(v1.pod_dir("BestEffort", UID_A) / n) for n in ("cpu.cfs_quota_us", "cpu.shares")
    }


def test_a_deleted_pod_cgroup_is_dropped_from_the_journal(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    pod = _pod(v1, UID_A, "Burstable")
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    enforcer.apply(500, [BePod(UID_A, "Burstable", 100)])
    for f in pod.iterdir():
        f.unlink()
    pod.rmdir()
    applied = enforcer.restore_all()
    assert (applied.error, enforcer.pending()) == (None, {})


def test_local_tightenings_are_counted_and_sources_checked(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    _pod(v1, UID_A, "BestEffort")
    pods = [BePod(UID_A, "BestEffort", 0)]
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    enforcer.apply(2000, pods)
    clock.advance(5)
    enforcer.apply(500, pods, source="local")
    enforcer.apply(500, pods, source="local")  # the same tightening, not a new one
    status = enforcer.current()
    assert (status.be_cpu_quota_m, status.source, status.local_actions) == (500, "local", 1)
    assert status.applied_at == clock.wall()
    enforcer.apply(800, pods, source="local")  # a loosening is no tightening
    assert enforcer.current().local_actions == 1
    with pytest.raises(ValueError, match="source"):
        enforcer.apply(500, pods, source="default")
    with pytest.raises(ValueError, match="quota_m"):
        enforcer.apply(0, pods)


def test_no_be_pod_on_the_node_means_defaults(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    applied = enforcer.apply(500, [BePod(UID_A, "BestEffort", 0)])
    assert (applied.mode, applied.quota_m, applied.missing) == ("none", None, (UID_A,))
    assert enforcer.current().source == "default"


def test_a_failure_is_returned_and_kept_for_the_report(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    _pod(v1, UID_A, "BestEffort")
    quota = v1.pods_dir("besteffort", "cpu") / "cpu.cfs_quota_us"
    quota.unlink()
    quota.mkdir()  # unreadable as a file, for root too
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    applied = enforcer.apply(500, [BePod(UID_A, "BestEffort", 0)])
    assert applied.error is not None and "cpu.cfs_quota_us" in applied.error
    assert enforcer.current().error == applied.error


def test_a_value_the_kernel_did_not_keep_is_an_error(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
):
    """As when kubelet rewrites shares between the write and the read, or the kernel clamps."""
    _pod(v1, UID_A, "BestEffort")
    write = enforcer_module._write_file

    def clamping(real: Path, value: str) -> None:
        write(real, "1024" if real.name == "cpu.shares" else value)

    monkeypatch.setattr(enforcer_module, "_write_file", clamping)
    applied = Enforcer(v1, tmp_path / "journal.json", clock).apply(
        500, [BePod(UID_A, "BestEffort", 0)]
    )
    assert applied.error is not None and "read back '1024'" in applied.error


# -- refusals -------------------------------------------------------------------------


@pytest.mark.parametrize("uid", ["..", "../../etc", f"{UID_A}/../..", "a/b", "", "x" * 10])
def test_a_uid_with_path_characters_names_no_cgroup(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock, uid: str
):
    before = _snapshot(tmp_path)
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    applied = enforcer.apply(500, [BePod(uid, "Burstable", 100)])
    assert (
        applied.mode == "none" and applied.error is not None and "Kubernetes UID" in applied.error
    )
    assert _snapshot(tmp_path) == before


def test_a_pod_cgroup_linked_outside_the_tree_is_refused(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    outside = _cgroup(tmp_path / "host-cgroup", v2=False)
    link = v1.pod_dir("Burstable", UID_A)
    link.symlink_to(outside, target_is_directory=True)
    before = _snapshot(tmp_path)
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    applied = enforcer.apply(500, [BePod(UID_A, "Burstable", 100)])
    assert applied.error is not None and "outside the kubepods tree" in applied.error
    assert _snapshot(tmp_path) == before


def test_a_besteffort_cgroup_linked_outside_the_tree_is_refused(tmp_path: Path, clock: FakeClock):
    layout = _tree(tmp_path)
    parent = layout.pods_dir("besteffort", "cpu")
    for f in parent.iterdir():
        f.unlink()
    parent.rmdir()
    outside = _cgroup(tmp_path / "elsewhere", v2=False)
    parent.symlink_to(outside, target_is_directory=True)
    _cgroup(outside / f"pod{UID_A}", v2=False)
    before = _snapshot(tmp_path)
    enforcer = Enforcer(layout, tmp_path / "journal.json", clock)
    applied = enforcer.apply(500, [BePod(UID_A, "BestEffort", 0)])
    assert applied.error is not None and "outside the kubepods tree" in applied.error
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("qos_class", ["Guaranteed", "guaranteed", "Unknown"])
def test_a_pod_outside_the_burstable_and_besteffort_trees_is_never_written(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock, qos_class: str
):
    """Whoever names it BE: its cgroup sits directly under kubepods (Guaranteed)."""
    _pod(v1, UID_A, "Guaranteed")
    _pod(v1, UID_B, "BestEffort")
    guaranteed = _snapshot(v1.pod_dir("Guaranteed", UID_A))
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    applied = enforcer.apply(500, [BePod(UID_A, qos_class, 1000), BePod(UID_B, "BestEffort", 0)])
    assert applied.error is not None and "is not BestEffort or Burstable" in applied.error
    assert applied.targets == ("besteffort",)  # the BestEffort pod is still throttled
    assert _snapshot(v1.pod_dir("Guaranteed", UID_A)) == guaranteed


def test_a_claimed_journal_is_refused_to_a_second_enforcer_until_released(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    first = Enforcer(v1, tmp_path / "state" / "journal.json", clock, exclusive=True)
    with pytest.raises(JournalBusyError, match="held by another agent"):
        Enforcer(v1, tmp_path / "state" / "journal.json", clock, exclusive=True)
    first.close()
    Enforcer(v1, tmp_path / "state" / "journal.json", clock, exclusive=True).close()


def test_a_damaged_or_hostile_journal_writes_nothing_outside(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    victim = _cgroup(tmp_path / "victim", v2=False)
    pod = _pod(v1, UID_A, "BestEffort")
    journal = {
        str(victim / "cpu.cfs_quota_us"): "1000",  # outside the tree
        str(v1.pods_dir(None, "cpu") / "besteffort/../../../victim/cpu.shares"): "2",  # ..
        str(pod / "cgroup.procs"): "1",  # inside, but not a CPU file
        str(v1.pods_dir(None, "cpu") / "cpu.cfs_quota_us"): "1000",  # kubepods itself
    }
    (tmp_path / "journal.json").write_text(json.dumps({"version": 1, "originals": journal}))
    (pod / "cgroup.procs").write_text("")
    before = _snapshot(tmp_path / "cgroup") | _snapshot(victim)
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    applied = enforcer.recover()
    assert applied.error is not None
    assert applied.error.count("refused") == 4
    assert _snapshot(tmp_path / "cgroup") | _snapshot(victim) == before
    assert enforcer.pending() == {}


def test_a_corrupt_journal_is_set_aside_and_reported(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    (tmp_path / "journal.json").write_text('{"version": 1, "originals": {"a": 5}}')
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    assert "cannot be restored" in (enforcer.current().error or "")
    assert (tmp_path / "journal.json.damaged").exists()
    assert not (tmp_path / "journal.json").exists()


def test_journal_saves_replace_the_file_whole(
    v1: cgroups.CgroupLayout, tmp_path: Path, clock: FakeClock
):
    _pod(v1, UID_A, "BestEffort")
    enforcer = Enforcer(v1, tmp_path / "journal.json", clock)
    enforcer.apply(500, [BePod(UID_A, "BestEffort", 0)])
    first = (tmp_path / "journal.json").read_text()
    os.link(tmp_path / "journal.json", tmp_path / "held")  # sees in-place writes, not renames
    _pod(v1, UID_B, "Burstable")
    enforcer.apply(500, [BePod(UID_A, "BestEffort", 0), BePod(UID_B, "Burstable", 100)])
    assert (tmp_path / "held").read_text() == first
    assert len(json.loads((tmp_path / "journal.json").read_text())["originals"]) == 4
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
