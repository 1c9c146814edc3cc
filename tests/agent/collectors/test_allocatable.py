from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.collectors import allocatable
from agent.hostpaths import HostPaths
from common import codec
from common.schema import CgroupLimits, KubeletSettings, KubepodsCgroup, is_absent
from tests.hosts import FIXTURES, host_paths

KIB, MIB, GIB = 1024, 2**20, 2**30


def _collect(paths: HostPaths, clock):
    section = allocatable.AllocatableCollector(paths, clock).collect()
    codec.validate(section)
    return section


def test_cgroup_v2_node_breakdown(clock):
    section = _collect(host_paths(FIXTURES / "k8s-v2-node"), clock)
    capacity = 65_848_316 * KIB
    mem = section.memory
    assert mem.capacity_b == capacity
    assert (mem.kube_reserved_b, mem.system_reserved_b, mem.eviction_hard_b) == (
        GIB,
        GIB,
        500 * MIB,
    )
    assert mem.kubelet_allocatable_b == capacity - 2 * GIB - 500 * MIB
    assert mem.kubepods_limit_b == capacity - 2 * GIB  # kubelet does not subtract eviction
    # Working sets: node = (total - free) - inactive file; pods = memory.current - inactive_file.
    node_ws = capacity - 18_204_112 * KIB - 11_884_204 * KIB
    pods_ws = 41_504_114_944 - 6_201_004_032
    assert (mem.node_working_set_b, mem.pods_working_set_b) == (node_ws, pods_ws)
    assert mem.non_pod_b == node_ws - pods_ws
    # Non-pod use is below the reservations here, so kubelet's budget is the binding one.
    assert mem.true_allocatable_b == mem.kubelet_allocatable_b
    assert mem.limited_by == "kubelet-allocatable"
    cpu = section.cpu
    assert (cpu.capacity_m, cpu.cpus, cpu.kubelet_allocatable_m) == (16_000, "0-15", 15_000)
    assert cpu.true_allocatable_m == 15_000
    cgroup = section.cgroup
    assert isinstance(cgroup, KubepodsCgroup)
    assert (cgroup.version, cgroup.driver) == (2, "systemd")
    assert cgroup.kubepods.cpu_weight == 586 and cgroup.kubepods.cpu_quota_m is None
    besteffort = cgroup.qos["besteffort"]
    assert isinstance(besteffort, CgroupLimits)
    assert besteffort.cpu_quota_m == 4000  # cpu.max "400000 100000"
    assert besteffort.memory_limit_b is None
    assert isinstance(section.kubelet, KubeletSettings)
    assert section.kubelet.cgroup_driver == "systemd"


def test_two_numa_host_with_reserved_cpus_hugepages_and_percent_eviction(clock):
    section = _collect(host_paths(FIXTURES / "two-numa-hugepages"), clock)
    capacity = (131_906_324 + 132_120_844) * KIB
    hugepages = 2048 * 2 * MIB + 8 * GIB
    mem = section.memory
    assert mem.hugepages_b == hugepages
    assert mem.eviction_hard_b == -(-capacity * 2 // 100)  # 2 %, rounded up
    assert mem.kubelet_allocatable_b == capacity - 4 * GIB - mem.eviction_hard_b - hugepages
    assert mem.kubepods_limit_b == capacity - 4 * GIB - hugepages
    node_ws = capacity - 101_224_008 * KIB - 39_201_108 * KIB
    pods_ws = 96_112_004_096 - 30_004_112_384
    assert mem.non_pod_b == node_ws - pods_ws
    # 60 GB outside pods is more than reserved: the measured use binds.
    assert mem.limited_by == "non-pod-usage"
    assert mem.true_allocatable_b == capacity - hugepages - mem.eviction_hard_b - mem.non_pod_b
    cpu = section.cpu
    # reservedSystemCPUs "0,32" replaces kube/system-reserved CPU with 2 whole CPUs.
    assert (cpu.kube_reserved_m, cpu.system_reserved_m, cpu.reserved_cpus_m) == (0, 0, 2000)
    assert cpu.kubelet_allocatable_m == 62_000
    assert section.kubelet.topology_manager_policy == "single-numa-node"
    assert section.cgroup.driver == "cgroupfs"


def test_cgroup_v1_limits(clock):
    section = _collect(host_paths(FIXTURES / "no-psi-v1"), clock)
    cgroup = section.cgroup
    assert (cgroup.version, cgroup.driver) == (1, "cgroupfs")
    assert cgroup.kubepods.memory_limit_b == 32_780_516 * KIB - GIB
    assert cgroup.kubepods.memory_working_set_b == 27_112_004_096 - 4_004_112_384
    assert cgroup.kubepods.cpu_weight == 7168  # v1 cpu.shares as written
    assert cgroup.qos["burstable"].memory_limit_b is None  # v1 "unlimited" sentinel
    assert cgroup.qos["besteffort"].cpu_quota_m == 2000
    # Absent evictionHard means kubelet's default memory.available<100Mi.
    assert section.memory.eviction_hard_b == 100 * MIB
    assert section.cpu.kubelet_allocatable_m == 7000


def test_unreadable_cgroup_file_is_absent_with_reason(host_copy, clock):
    root = host_copy("k8s-v2-node")
    limit = root / "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/memory.max"
    limit.unlink()
    limit.mkdir()  # reading a directory fails as an unreadable file does
    section = _collect(host_paths(root), clock)
    burstable = section.cgroup.qos["burstable"]
    assert is_absent(burstable) and "memory.max" in burstable
    assert isinstance(section.cgroup.qos["besteffort"], CgroupLimits)
    (root / "sys/fs/cgroup/kubepods.slice/memory.current").write_text("lots\n")
    section = _collect(host_paths(root), clock)
    assert is_absent(section.cgroup) and "memory.current" in section.cgroup
    assert section.memory.pods_working_set_b is None  # and the breakdown says so


def test_missing_or_broken_kubelet_config(host_copy, clock):
    root = host_copy("k8s-v2-node")
    config = root / "var/lib/kubelet/config.yaml"
    config.write_text("kubeReserved: [not, a, map]\n")
    section = _collect(host_paths(root), clock)
    assert is_absent(section.kubelet) and "kubeReserved" in section.kubelet
    assert section.memory.kubelet_allocatable_b is None
    config.unlink()
    section = _collect(host_paths(root), clock)
    assert section.kubelet.startswith("kubelet-config-missing")


def test_this_machine_agrees_with_independent_reads(clock):
    paths = HostPaths.under("/proc", "/sys", kubelet_config="/nonexistent/config.yaml")
    section = _collect(paths, clock)
    meminfo = {
        line.split(":")[0]: int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
    }
    assert section.memory.capacity_b == meminfo["MemTotal"] * KIB
    online = Path("/sys/devices/system/cpu/online").read_text().strip()
    first, _, last = online.partition("-")
    count = int(last or first) - int(first) + 1 if "," not in online else os.cpu_count()
    assert section.cpu.capacity_m == count * 1000
    hugepages = sum(
        int(p.name[10:-2]) * KIB * int((p / "nr_hugepages").read_text())
        for p in Path("/sys/kernel/mm/hugepages").glob("hugepages-*")
    )
    assert section.memory.hugepages_b == hugepages
    assert section.memory.true_allocatable_b <= section.memory.capacity_b - hugepages


@pytest.mark.parametrize("value", ["max", "12345"])
def test_kubepods_memory_limit_unlimited_or_set(host_copy, clock, value):
    root = host_copy("k8s-v2-node")
    (root / "sys/fs/cgroup/kubepods.slice/memory.max").write_text(value + "\n")
    section = _collect(host_paths(root), clock)
    assert section.memory.kubepods_limit_b == (None if value == "max" else 12345)
    if value != "max":
        assert section.memory.limited_by == "kubepods-limit"
        assert section.memory.true_allocatable_b == 12345


def test_kubelet_config_changes_are_picked_up(host_copy, clock):
    root = host_copy("k8s-v2-node")
    collector = allocatable.AllocatableCollector(host_paths(root), clock)
    assert collector.collect().memory.kube_reserved_b == GIB
    config = root / "var/lib/kubelet/config.yaml"
    config.write_text(
        config.read_text().replace("memory: 1Gi\nsystemReserved", "memory: 3Gi\nsystemReserved")
    )
    assert collector.collect().memory.kube_reserved_b == 3 * GIB
