"""Each pod's NUMA nodes from its containers' cpusets: on trees laid out as kubelet lays
them out (cgroup v2 with the systemd driver, v1 with cgroupfs) over the recorded
two-NUMA host's sysfs (node0 CPUs 0-31, node1 32-63), on bad cpusets, and on this
machine's real sysfs and real cpuset controller."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import pytest

from agent.podnuma import (
    MAX_CONTAINERS,
    MAX_RANGES,
    CpusetError,
    NumaMap,
    PodNuma,
    numa_nodes_of,
    parse_ranges,
)
from common.schema import PodInfo, Resources
from tests.hosts import FIXTURES, FakeClock

PINNED = "aaaaaaaa-0000-4000-8000-000000000001"
SHARED = "bbbbbbbb-0000-4000-8000-000000000002"
NEW = "cccccccc-0000-4000-8000-000000000003"
PENDING = "dddddddd-0000-4000-8000-000000000004"
HOST_SYS = FIXTURES / "two-numa-hugepages" / "sys"


def pod(uid: str, qos: str = "Burstable", name: str | None = None) -> PodInfo:
    none = Resources(cpu_m=0, mem_b=0, gpu=0, hugepages_b=0, extended={})
    return PodInfo(
        namespace="team-a",
        name=name or f"p-{uid[:4]}",
        uid=uid,
        phase="Running",
        qos_class=qos,
        priority=0,
        priority_class=None,
        requests=none,
        limits=none,
        labels={},
    )


def write(path: Path, text: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "cpuset.cpus.effective").write_text(text + "\n")


def v2_systemd_host(root: Path) -> Path:
    """A cgroup v2 host, systemd driver, with kubelet's static CPU manager: a Guaranteed
    pod pinned to CPUs 40-43 (NUMA 1; its pod slice holds every CPU, as kubelet leaves
    pod slices), a Burstable pod with two containers on the shared pool (every CPU but
    40-43), and a Burstable pod whose container cgroups are not made yet."""
    cgroup = root / "cgroup"
    (cgroup / "kubepods.slice").mkdir(parents=True)
    (cgroup / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    guaranteed = cgroup / "kubepods.slice" / f"kubepods-pod{PINNED.replace('-', '_')}.slice"
    write(guaranteed, "0-63")
    write(guaranteed / "cri-containerd-1111.scope", "40-43")
    burstable = cgroup / "kubepods.slice" / "kubepods-burstable.slice"
    shared = burstable / f"kubepods-burstable-pod{SHARED.replace('-', '_')}.slice"
    write(shared, "0-39,44-63")
    write(shared / "cri-containerd-2222.scope", "0-39,44-63")
    write(shared / "cri-containerd-3333.scope", "0-39,44-63")
    write(burstable / f"kubepods-burstable-pod{NEW.replace('-', '_')}.slice", "0-31")
    return cgroup


def reader(cgroup: Path, sys: Path = HOST_SYS) -> PodNuma:
    return PodNuma(cgroup, sys, FakeClock())


def test_v2_systemd_pods_by_their_containers_cpusets(tmp_path: Path) -> None:
    cgroup = v2_systemd_host(tmp_path)
    placed = reader(cgroup).numa_nodes(
        [pod(PINNED, "Guaranteed"), pod(SHARED), pod(NEW), pod(PENDING)]
    )
    assert placed == {
        PINNED: [1],  # its containers' CPUs, not its pod slice's (every CPU)
        SHARED: [0, 1],  # the shared pool spans both NUMA nodes
        NEW: [0],  # no container cgroups yet: the pod's own cpuset
        PENDING: None,  # no cgroup at all: not known
    }


def test_v1_cgroupfs_pods_read_from_the_cpuset_controller(tmp_path: Path) -> None:
    cgroup = tmp_path / "cgroup"
    (cgroup / "memory" / "kubepods").mkdir(parents=True)  # how the layout is recognised
    pinned = cgroup / "cpuset" / "kubepods" / f"pod{PINNED}" / "c0ffee"
    pinned.mkdir(parents=True)
    (pinned / "cpuset.effective_cpus").write_text("2-3,34-35\n")
    placed = reader(cgroup).numa_nodes([pod(PINNED, "Guaranteed")])
    assert placed == {PINNED: [0, 1]}


def test_no_kubepods_tree_or_no_numa_in_sysfs_places_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert reader(empty).numa_nodes([pod(PINNED)]) == {}
    cgroup = v2_systemd_host(tmp_path)
    assert reader(cgroup, sys=empty).numa_nodes([pod(PINNED, "Guaranteed")]) == {}


@pytest.mark.parametrize(
    ("cpuset", "says"),
    [
        ("60-67", "CPU 64 is not on a NUMA node"),  # CPUs the host lacks
        ("0-1048575", "CPU 64 is not on a NUMA node"),  # huge, never expanded
        (",".join(str(c) for c in range(2 * MAX_RANGES)), f"more than {MAX_RANGES} ranges"),
        ("0-x", "bad cpu list element"),
        ("9-3", "bad cpu range"),
        ("99999999999-1", "bad cpu list element"),
    ],
)
def test_a_bad_cpuset_leaves_that_pod_unknown_and_names_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, cpuset: str, says: str
) -> None:
    cgroup = v2_systemd_host(tmp_path)
    shared = next(cgroup.glob("kubepods.slice/kubepods-burstable.slice/*pod*bbbb*"))
    write(shared / "cri-containerd-3333.scope", cpuset)
    numa = reader(cgroup)
    pods = [pod(PINNED, "Guaranteed"), pod(SHARED, name="bad")]
    with caplog.at_level(logging.WARNING, logger="agent.podnuma"):
        assert numa.numa_nodes(pods) == {PINNED: [1], SHARED: None}
        assert numa.numa_nodes(pods) == {PINNED: [1], SHARED: None}
    (warning,) = caplog.messages  # once, not every cycle
    assert "team-a/bad" in warning and says in warning and str(shared) in warning


def test_more_container_cgroups_than_a_pod_has_leave_it_unknown(tmp_path: Path) -> None:
    cgroup = v2_systemd_host(tmp_path)
    shared = next(cgroup.glob("kubepods.slice/kubepods-burstable.slice/*pod*bbbb*"))
    for k in range(MAX_CONTAINERS):
        (shared / f"extra-{k}").mkdir()
    assert reader(cgroup).numa_nodes([pod(SHARED)]) == {SHARED: None}


def test_ranges_are_mapped_without_expanding_them() -> None:
    assert parse_ranges("0-3,8\n") == ((0, 3), (8, 8))
    assert parse_ranges("") == ()
    # CPU 5 offline: node 0 has 0-4, node 1 has 6-7.
    numa = NumaMap.of([(0, ((0, 4),)), (1, ((6, 7),))])
    assert numa_nodes_of([(4, 4), (6, 7)], numa) == [0, 1]
    assert numa_nodes_of([(0, 2)], numa) == [0]
    with pytest.raises(CpusetError, match="CPU 5 is not"):
        numa_nodes_of([(4, 6)], numa)
    with pytest.raises(CpusetError, match="on two NUMA nodes"):
        NumaMap.of([(0, ((0, 4),)), (1, ((4, 7),))])


# ------------------------------------------------------------------ the real host


def real_cpuset_mount() -> Path | None:
    path = Path("/sys/fs/cgroup/cpuset")
    if (path / "cpuset.effective_cpus").exists() and os.access(path, os.W_OK):
        return path
    return None


def test_real_cpuset_on_real_sysfs_agrees_with_the_cpus_own_node_links(tmp_path: Path) -> None:
    """A private ``kubepods/pod<uid>/<container>`` tree in this machine's cpuset controller,
    the container limited to the last CPU this process may use: the kernel fills in
    ``cpuset.effective_cpus``, the real ``/sys/devices/system/node`` maps it, and the CPU's
    own ``/sys/devices/system/cpu/cpuN/nodeM`` link says which NUMA node is right."""
    mount = real_cpuset_mount()
    if mount is None:
        pytest.skip("no writable cgroup v1 cpuset controller (needs root on a v1 host)")
    cpu = max(os.sched_getaffinity(0))
    links = list(Path(f"/sys/devices/system/cpu/cpu{cpu}").glob("node[0-9]*"))
    if not links:
        pytest.skip(f"CPU {cpu} has no NUMA node link in sysfs")
    expected = [int(links[0].name.removeprefix("node"))]
    mems = (mount / "cpuset.effective_mems").read_text().strip()
    uid = str(uuid.uuid4())
    base = mount / f"stowage-test-{os.getpid()}-{uid[:8]}"
    levels = [base, base / "kubepods", base / "kubepods" / f"pod{uid}"]
    container = levels[-1] / "ctr"
    made: list[Path] = []
    try:
        every = (mount / "cpuset.effective_cpus").read_text().strip()
        for level in [*levels, container]:
            level.mkdir()
            made.append(level)
            (level / "cpuset.mems").write_text(mems)
            (level / "cpuset.cpus").write_text(str(cpu) if level == container else every)
        root = tmp_path / "cgroup"
        (root / "memory" / "kubepods").mkdir(parents=True)  # how the layout is recognised
        (root / "cpuset").symlink_to(base)
        assert (container / "cpuset.effective_cpus").read_text().strip() == str(cpu)
        placed = PodNuma(root, Path("/sys"), FakeClock()).numa_nodes([pod(uid, "Guaranteed")])
        assert placed == {uid: expected}
    finally:
        for level in reversed(made):
            level.rmdir()


def test_real_sysfs_maps_every_cpu_this_process_may_use(tmp_path: Path) -> None:
    """The whole affinity of this process as one pod's cpuset, on the real sysfs: every
    NUMA node whose CPUs it names, by the CPUs' own node links."""
    cpus = sorted(os.sched_getaffinity(0))
    expected = sorted(
        {
            int(link.name.removeprefix("node"))
            for c in cpus
            for link in Path(f"/sys/devices/system/cpu/cpu{c}").glob("node[0-9]*")
        }
    )
    if not expected:
        pytest.skip("no NUMA node links in this machine's sysfs")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cgroup.controllers").write_text("cpuset\n")
    write(cgroup / "kubepods" / f"pod{PINNED}", ",".join(map(str, cpus)))
    assert PodNuma(cgroup, Path("/sys"), FakeClock()).numa_nodes([pod(PINNED, "Guaranteed")]) == {
        PINNED: expected
    }
