"""True allocatable: what pods on this node can really use, with the full breakdown.

Kubelet's allocatable is a static budget (capacity − kube-reserved − system-reserved −
hard eviction threshold − hugepages). What pods can use *now* is also bounded by the
kubepods cgroup limit kubelet enforces, and by memory that non-pod processes and the
kernel actually hold, which can exceed what was reserved for them. The coordinator packs
against the smallest of these, and the report says which one it was (``limited_by``).

Memory held outside pods = node working set − kubepods working set (both "usage −
inactive file", the definition kubelet evicts on). Where there is no kubepods tree (not a
Kubernetes node), everything in use is held outside pods.
"""

from __future__ import annotations

from typing import Final

from agent import cgroups, kubeletconfig
from agent.collectors.usage import read_memory
from agent.hostpaths import HostPaths
from agent.kernelfiles import CollectorError, parse_cpulist, read_text
from agent.settings import AgentSettings
from common.clock import Clock
from common.schema import (
    Absent,
    AllocatableSection,
    CgroupLimits,
    CpuAllocatable,
    KubeletSettings,
    KubepodsCgroup,
    MemoryAllocatable,
)

NAME: Final = "allocatable"


class AllocatableCollector:
    name = NAME

    def __init__(self, paths: HostPaths, clock: Clock) -> None:
        self._paths = paths
        self._clock = clock
        self._layout = cgroups.LayoutWatch(paths.cgroup, clock)
        # Parsed kubelet config and the (mtime, size) it was parsed at: YAML parsing is
        # the dearest step of a cycle and the file changes only when kubelet is reconfigured.
        self._kubelet_cache: tuple[tuple[int, int], _KubeletResult] | None = None

    def collect(self) -> AllocatableSection:
        cpus = self._cpus()
        node_mem = read_memory(self._paths.proc)
        hugepages_b = self._hugepages_b()
        kubelet, reserved = self._kubelet(node_mem.total_b)
        cgroup = self._cgroup()
        kubepods = cgroup.kubepods if isinstance(cgroup, KubepodsCgroup) else None

        capacity_m = len(cpus) * 1000
        cpu_terms = {"capacity": capacity_m}
        kubelet_cpu = None
        if reserved is not None:
            kubelet_cpu = max(
                0,
                capacity_m
                - reserved.kube_reserved_m
                - reserved.system_reserved_m
                - reserved.reserved_cpus_m,
            )
            cpu_terms["kubelet-allocatable"] = kubelet_cpu
        if kubepods is not None and kubepods.cpu_quota_m is not None:
            cpu_terms["kubepods-quota"] = kubepods.cpu_quota_m
        cpu_limit = min(cpu_terms, key=lambda k: cpu_terms[k])

        eviction_b = (
            reserved.eviction_hard_b if reserved else kubeletconfig.DEFAULT_EVICTION_MEMORY_B
        )
        pods_ws = kubepods.memory_working_set_b if kubepods is not None else None
        non_pod = max(0, node_mem.working_set_b - (pods_ws or 0))
        mem_terms = {
            "non-pod-usage": max(0, node_mem.total_b - hugepages_b - eviction_b - non_pod),
        }
        kubelet_mem = None
        if reserved is not None:
            kubelet_mem = max(
                0,
                node_mem.total_b
                - reserved.kube_reserved_b
                - reserved.system_reserved_b
                - eviction_b
                - hugepages_b,
            )
            mem_terms["kubelet-allocatable"] = kubelet_mem
        if kubepods is not None and kubepods.memory_limit_b is not None:
            mem_terms["kubepods-limit"] = kubepods.memory_limit_b
        mem_limit = min(mem_terms, key=lambda k: mem_terms[k])

        return AllocatableSection(
            measured_at=self._clock.wall(),
            cpu=CpuAllocatable(
                capacity_m=capacity_m,
                cpus=_format_cpulist(cpus),
                kube_reserved_m=reserved.kube_reserved_m if reserved else 0,
                system_reserved_m=reserved.system_reserved_m if reserved else 0,
                reserved_cpus_m=reserved.reserved_cpus_m if reserved else 0,
                kubelet_allocatable_m=kubelet_cpu,
                true_allocatable_m=cpu_terms[cpu_limit],
                limited_by=cpu_limit,
            ),
            memory=MemoryAllocatable(
                capacity_b=node_mem.total_b,
                hugepages_b=hugepages_b,
                kube_reserved_b=reserved.kube_reserved_b if reserved else 0,
                system_reserved_b=reserved.system_reserved_b if reserved else 0,
                eviction_hard_b=eviction_b,
                kubelet_allocatable_b=kubelet_mem,
                kubepods_limit_b=kubepods.memory_limit_b if kubepods else None,
                node_working_set_b=node_mem.working_set_b,
                pods_working_set_b=pods_ws,
                non_pod_b=non_pod,
                true_allocatable_b=mem_terms[mem_limit],
                limited_by=mem_limit,
            ),
            kubelet=kubelet,
            cgroup=cgroup,
        )

    def _cpus(self) -> list[int]:
        """Online CPUs, narrowed by the root cpuset when one is readable."""
        online_path = self._paths.sys / "devices" / "system" / "cpu" / "online"
        try:
            online = parse_cpulist(read_text(online_path))
        except ValueError as e:
            raise CollectorError(f"parse {online_path}: {e}") from e
        if not online:
            raise CollectorError(f"{online_path}: no online CPU")
        root = self._paths.cgroup
        for candidate in (
            root / "cpuset.cpus.effective",
            root / "cpuset" / "cpuset.effective_cpus",
            root / "cpuset" / "cpuset.cpus",
        ):
            try:
                allowed = set(parse_cpulist(read_text(candidate)))
            except (CollectorError, ValueError):
                continue
            narrowed = [c for c in online if c in allowed]
            return narrowed or online
        return online

    def _hugepages_b(self) -> int:
        """Bytes in hugetlb pools: kubelet removes these from allocatable memory."""
        directory = self._paths.sys / "kernel" / "mm" / "hugepages"
        if not directory.is_dir():
            return 0
        total = 0
        for pool in directory.glob("hugepages-*kB"):
            size_kb = pool.name.removeprefix("hugepages-").removesuffix("kB")
            count = read_text(pool / "nr_hugepages").strip()
            if not (size_kb.isdigit() and count.isdigit()):
                raise CollectorError(f"parse {pool}: unexpected pool name or count {count[:20]!r}")
            total += int(size_kb) * 1024 * int(count)
        return total

    def _kubelet(self, capacity_b: int) -> _KubeletResult:
        path = self._paths.kubelet_config
        if path is None:
            return Absent("no-kubelet-config: pass --kubelet-config"), None
        try:
            stat = path.stat()
        except FileNotFoundError:
            return Absent(f"kubelet-config-missing: {path}"), None
        except OSError as e:
            return Absent(f"error: kubelet config: {path}: {e.strerror}"[:300]), None
        key = (stat.st_mtime_ns, stat.st_size)
        cached = self._kubelet_cache
        if cached is not None and cached[0] == key and _same_capacity(cached[1], capacity_b):
            return cached[1]
        try:
            data = kubeletconfig.load(path)
            result: _KubeletResult = (
                kubeletconfig.settings(path, data),
                kubeletconfig.reservations(data, capacity_b),
            )
        except (kubeletconfig.KubeletConfigError, OSError) as e:
            result = Absent(f"error: kubelet config: {e}"[:300]), None
        self._kubelet_cache = (key, result)
        return result

    def _cgroup(self) -> KubepodsCgroup | Absent:
        layout = self._layout.get()
        if layout is None:
            return Absent(f"no-kubepods-cgroup: none under {self._paths.cgroup}")
        try:
            kubepods = _limits(layout, None)
        except CollectorError as e:
            self._layout.invalidate()
            return Absent(f"error: {e}"[:300])
        qos: dict[str, CgroupLimits | Absent] = {}
        for name in cgroups.QOS_CLASSES:
            try:
                qos[name] = _limits(layout, name)
            except CollectorError as e:
                qos[name] = Absent(f"error: {e}"[:300])
        return KubepodsCgroup(
            version=layout.version, driver=layout.driver, kubepods=kubepods, qos=qos
        )


_KubeletResult = tuple[KubeletSettings | Absent, kubeletconfig.Reservations | None]


def _same_capacity(result: _KubeletResult, capacity_b: int) -> bool:
    """Percent eviction thresholds depend on capacity, which hotplug can change."""
    return result[1] is None or result[1].capacity_b == capacity_b


def _limits(layout: cgroups.CgroupLayout, qos: str | None) -> CgroupLimits:
    mem_dir = layout.pods_dir(qos, "memory")
    cpu_dir = layout.pods_dir(qos, "cpu")
    if not mem_dir.is_dir():
        raise CollectorError(f"{mem_dir}: no such cgroup")
    current, working_set = cgroups.memory_usage(mem_dir, layout.version)
    return CgroupLimits(
        path=str(mem_dir),
        memory_limit_b=cgroups.memory_limit_b(mem_dir, layout.version),
        memory_current_b=current,
        memory_working_set_b=working_set,
        cpu_quota_m=cgroups.cpu_quota_m(cpu_dir, layout.version),
        cpu_weight=cgroups.cpu_weight(cpu_dir, layout.version),
    )


def _format_cpulist(cpus: list[int]) -> str:
    """Sorted CPU ids back to the kernel's compact ``0-3,8`` form."""
    parts: list[str] = []
    start = prev = None
    for cpu in cpus:
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = cpu
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(parts)


def build(settings: AgentSettings, clock: Clock) -> AllocatableCollector:
    return AllocatableCollector(settings.paths, clock)
