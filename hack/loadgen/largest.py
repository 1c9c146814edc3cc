"""The largest report the schema admits: every list and map at its schema maximum.

:func:`largest_report` fills every list and map of :class:`common.schema.NodeReport` to the
``max_length`` its schema gives it — 64 GPUs on a full NVLink mesh with 64 MIG devices
each, 1,024 NUMA nodes each with 1,024 distances, 1,024 zones with 64 orders each, 4,096
pods with 64 labels each and their use, and so on — read from the schema itself
(:func:`most`), so it stays the largest when a maximum changes. Strings are short and
numbers ordinary: no search reads their length, and filling every string to its maximum
would make a report of gigabytes that no body limit lets in. What the coordinator does
with such a report, on every verb, is what ``tests/coordinator/test_largest_report.py``
checks and ``python -m hack.bench.largest_report`` times.

A full mesh (every pair of GPUs linked, NVSwitch-style) is what made choosing linked GPUs
try every set of devices: no set has fewer links than another, so nothing was pruned.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import inspect

from common.schema import (
    SCHEMA_VERSION,
    AllocatableSection,
    CgroupLimits,
    Compaction,
    CpuAllocatable,
    CpuUsage,
    DiskUsage,
    Enforcement,
    GpuDevice,
    GpuSection,
    HugepagePool,
    KubeletSettings,
    KubepodsCgroup,
    MemfragSection,
    MemoryAllocatable,
    MemoryUsage,
    MigDevice,
    NodeContiguity,
    NodeReport,
    NumaNode,
    NumaSection,
    PodInfo,
    PodsSection,
    PodUsage,
    PsiGroup,
    PsiLine,
    PsiResource,
    PsiSection,
    Resources,
    UsageSection,
    XidSeen,
    ZoneFrag,
)

GIB: Final = 2**30
MIB: Final = 2**20
NVLINKS: Final = 18
"""Links between every pair of GPUs: an NVSwitch system's ``NV18``."""


def most(struct: type[msgspec.Struct], field: str) -> int:
    """The schema's ``max_length`` of ``struct.field`` (a list or map, possibly one side
    of a union with :data:`common.schema.Absent` or None)."""
    info = inspect.type_info(struct)
    assert isinstance(info, inspect.StructType)
    (found,) = [f for f in info.fields if f.name == field]
    kinds = found.type.types if isinstance(found.type, inspect.UnionType) else (found.type,)
    for kind in kinds:
        if isinstance(kind, inspect.ListType | inspect.DictType) and kind.max_length is not None:
            return kind.max_length
    raise TypeError(f"{struct.__name__}.{field} is not a bounded list or map")


MAX_GPUS: Final = most(GpuSection, "devices")
MAX_PODS: Final = most(PodsSection, "pods")


def _line(avg10: float) -> PsiLine:
    return PsiLine(
        avg10_pct=avg10, avg60_pct=avg10, avg300_pct=avg10, total_us=1_000_000, rate_pct=avg10
    )


def _group(path: str) -> PsiGroup:
    resource = PsiResource(some=_line(1.0), full=_line(0.5))
    return PsiGroup(path=path, cpu=resource, memory=resource, io=resource, irq=resource)


def _psi(now: float) -> PsiSection:
    groups = most(PsiSection, "cgroups")
    return PsiSection(
        measured_at=now,
        interval_s=10.0,
        system=_group("/proc/pressure"),
        cgroups={f"cg{k}": _group(f"/sys/fs/cgroup/cg{k}") for k in range(groups)},
    )


def _memfrag(now: float) -> MemfragSection:
    orders = most(ZoneFrag, "free_b_by_order")
    zones = [
        ZoneFrag(
            node=k,
            zone="Normal",
            free_b=orders * MIB,
            free_b_by_order=[MIB] * orders,
            free_b_ge_2mib=(orders - 9) * MIB,
            free_b_ge_1gib=0,
            largest_block_b=MIB,
            unusable_frac_by_order=[
                k / orders for k in range(most(ZoneFrag, "unusable_frac_by_order"))
            ],
            low_watermark_b=MIB,
        )
        for k in range(most(MemfragSection, "zones"))
    ]
    nodes = [
        NodeContiguity(
            node=k,
            free_b=4 * GIB,
            free_b_ge_2mib=2 * GIB,
            free_b_ge_1gib=GIB,
            largest_block_b=GIB,
            unusable_2mib_frac=0.5,
        )
        for k in range(most(MemfragSection, "nodes"))
    ]
    pools = [
        HugepagePool(size_b=2 * MIB, node=k, total=16, free=8, surplus=0, reserved=0)
        for k in range(most(MemfragSection, "hugepages"))
    ]
    counters = {f"counter_{k}": k for k in range(most(Compaction, "counters"))}
    rates = {f"counter_{k}": 0.1 * k for k in range(most(Compaction, "rates_per_s"))}
    return MemfragSection(
        measured_at=now,
        page_size_b=4096,
        order_2mib=9,
        order_1gib=18,
        zones=zones,
        nodes=nodes,
        hugepages=pools,
        thp_enabled="madvise",
        thp_defrag="madvise",
        compaction=Compaction(counters=counters, rates_per_s=rates),
    )


def _allocatable(now: float, cpus: int, memory_b: int) -> AllocatableSection:
    limits = CgroupLimits(
        path="/sys/fs/cgroup/kubepods.slice",
        memory_limit_b=memory_b,
        memory_current_b=GIB,
        memory_working_set_b=GIB,
        cpu_quota_m=None,
        cpu_weight=8000,
    )
    return AllocatableSection(
        measured_at=now,
        cpu=CpuAllocatable(
            capacity_m=cpus * 1000,
            cpus=f"0-{cpus - 1}",
            kube_reserved_m=0,
            system_reserved_m=0,
            reserved_cpus_m=0,
            kubelet_allocatable_m=cpus * 1000,
            true_allocatable_m=cpus * 1000,
            limited_by="kubelet",
        ),
        memory=MemoryAllocatable(
            capacity_b=memory_b,
            hugepages_b=0,
            kube_reserved_b=0,
            system_reserved_b=0,
            eviction_hard_b=100 * MIB,
            kubelet_allocatable_b=memory_b,
            kubepods_limit_b=memory_b,
            node_working_set_b=GIB,
            pods_working_set_b=GIB,
            non_pod_b=0,
            true_allocatable_b=memory_b,
            limited_by="kubelet",
        ),
        kubelet=KubeletSettings(
            path="/var/lib/kubelet/config.yaml",
            cgroup_driver="systemd",
            cgroups_per_qos=True,
            enforce_node_allocatable=[
                f"pods{k}" for k in range(most(KubeletSettings, "enforce_node_allocatable"))
            ],
            cpu_manager_policy="static",
            memory_manager_policy="Static",
            topology_manager_policy="single-numa-node",
            topology_manager_scope="pod",
            reserved_system_cpus=None,
        ),
        cgroup=KubepodsCgroup(
            version=2,
            driver="systemd",
            kubepods=limits,
            qos={f"qos{k}": limits for k in range(most(KubepodsCgroup, "qos"))},
        ),
    )


def _numa(now: float, cpus: int, memory_b: int) -> NumaSection:
    count = most(NumaSection, "nodes")
    distances = most(NumaNode, "distances")
    return NumaSection(
        measured_at=now,
        nodes=[
            NumaNode(
                node=k,
                cpus="0",
                cpu_count=max(1, cpus // count),
                mem_total_b=memory_b // count,
                mem_free_b=memory_b // count // 2,
                mem_available_b=memory_b // count // 2,
                distances=[10 if j == k else 20 for j in range(distances)],
            )
            for k in range(count)
        ],
    )


def _gpus(now: float) -> GpuSection:
    migs = most(GpuDevice, "mig_devices")
    devices = [
        GpuDevice(
            index=i,
            uuid=f"GPU-{i:08x}",
            name="NVIDIA H100 80GB HBM3",
            pci_bus_id=f"00000000:{i:02X}:00.0",
            numa_node=0,
            mem_total_b=80 * GIB,
            mem_used_b=0,
            util_gpu_pct=0.0,
            util_mem_pct=0.0,
            mig_enabled=True,
            mig_devices=[
                MigDevice(
                    uuid=f"MIG-{i:04x}{m:04x}",
                    gpu_instance_id=m,
                    compute_instance_id=0,
                    mem_total_b=GIB,
                )
                for m in range(migs)
            ],
            ecc_enabled=True,
            ecc_uncorrected_volatile=0,
            retired_pages_pending=False,
            remapped_rows_pending=False,
            remapping_failed=False,
            nvlinks_active=NVLINKS,
            xid_critical=0,
            last_xid=None,
            health="ok",
            health_reasons=[f"reason {k}" for k in range(most(GpuDevice, "health_reasons"))],
            xid_recent=[
                XidSeen(xid=79, age_s=7200.0 + k) for k in range(most(GpuDevice, "xid_recent"))
            ],
            retired_pages=0,
        )
        for i in range(MAX_GPUS)
    ]
    return GpuSection(
        measured_at=now,
        driver_version="550.54.15",
        devices=devices,
        topology=[[0 if i == j else 10 for j in range(MAX_GPUS)] for i in range(MAX_GPUS)],
        nvlinks=[[0 if i == j else NVLINKS for j in range(MAX_GPUS)] for i in range(MAX_GPUS)],
    )


def _usage(now: float, cpus: int, memory_b: int) -> UsageSection:
    return UsageSection(
        measured_at=now,
        cpu=CpuUsage(
            window_s=10.0, used_m=cpus * 100, used_pct=10.0, iowait_pct=0.0, steal_pct=0.0
        ),
        memory=MemoryUsage(
            total_b=memory_b,
            used_b=GIB,
            working_set_b=GIB,
            page_cache_b=0,
            inactive_file_b=0,
            available_b=memory_b - GIB,
            shmem_b=0,
            unevictable_b=0,
            swap_used_b=0,
        ),
        disks=[
            DiskUsage(name=f"nvme{k}n1", util_pct=1.0, await_ms=0.5, iops=10.0)
            for k in range(most(UsageSection, "disks"))
        ],
    )


def _resources() -> Resources:
    extended = most(Resources, "extended")
    return Resources(
        cpu_m=10,
        mem_b=MIB,
        gpu=0,
        hugepages_b=0,
        extended={f"example.com/r{k}": 1 for k in range(extended)},
    )


def _uid(k: int) -> str:
    return f"00000000-0000-0000-0000-{k:012d}"


def _pods(now: float) -> PodsSection:
    labels = most(PodInfo, "labels")
    placed = most(PodInfo, "numa_nodes")
    resources = _resources()
    return PodsSection(
        measured_at=now,
        source="kubelet",
        pods=[
            PodInfo(
                namespace="tenant",
                name=f"p{k}",
                uid=_uid(k),
                phase="Running",
                qos_class="BestEffort" if k % 2 else "Burstable",
                priority=0,
                priority_class=None,
                requests=resources,
                limits=resources,
                labels={f"l{j}": "v" for j in range(labels)},
                numa_nodes=list(range(placed)),
            )
            for k in range(MAX_PODS)
        ],
    )


def largest_report(
    node: str, now: float, *, seq: int = 1, cpus: int = 1024, memory_b: int = 16384 * GIB
) -> NodeReport:
    """The largest report of ``node`` (see the module), measured at ``now`` (Unix
    seconds), for a machine of ``cpus`` and ``memory_b``."""
    usage = most(NodeReport, "pod_usage")
    return NodeReport(
        schema_version=SCHEMA_VERSION,
        node=node,
        agent_version="0.1.0",
        seq=seq,
        measured_at=now,
        psi=_psi(now),
        memfrag=_memfrag(now),
        allocatable=_allocatable(now, cpus, memory_b),
        numa=_numa(now, cpus, memory_b),
        gpus=_gpus(now),
        usage=_usage(now, cpus, memory_b),
        pods=_pods(now),
        enforcement=Enforcement(
            be_cpu_quota_m=None, source="default", applied_at=None, local_actions=0
        ),
        pod_usage={_uid(k): PodUsage(10, 1.0, 1.0) for k in range(usage)},
    )
