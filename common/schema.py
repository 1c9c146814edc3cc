"""The node report, schema version 1: what an agent tells the coordinator each cycle.

Every section is either its dataclass or :class:`Absent` with a reason: a signal that
cannot be measured on a node is *absent*, never zero (DESIGN §2). Every section carries
``measured_at`` (Unix seconds), so staleness is explicit (DESIGN §3).

Field types carry their valid range through ``Annotated`` aliases (``Bytes``, ``Pct`` …);
:mod:`common.codec` enforces them on decode, so NaN, negative or absurd quantities never
reach the coordinator. Units are in the names: ``_b`` bytes, ``_m`` millicores, ``_us``
microseconds, ``_s`` seconds, ``_pct`` percent (0–100), ``_frac`` fraction (0–1),
``_at`` Unix time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Final

SCHEMA_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class Range:
    """Inclusive bounds of a numeric field, read by the codec from ``Annotated`` metadata."""

    lo: float
    hi: float


@dataclass(frozen=True, slots=True)
class MaxLen:
    """Upper bound on the length of a string, list or map field."""

    n: int


_PIB: Final = 2**50
Bytes = Annotated[int, Range(0, _PIB)]
"""A byte amount; 1 PiB on one node is absurd, so it is the ceiling."""
MilliCPU = Annotated[int, Range(0, 100_000_000)]
"""Millicores; 100 000 cores on one node is the ceiling."""
Pct = Annotated[float, Range(0.0, 100.0)]
Frac = Annotated[float, Range(0.0, 1.0)]
Micros = Annotated[int, Range(0, 2**63 - 1)]
"""A cumulative microsecond counter (PSI ``total``)."""
Count = Annotated[int, Range(0, 2**63 - 1)]
Seconds = Annotated[float, Range(0.0, 10.0**9)]
UnixTime = Annotated[float, Range(0.0, 2.0**34)]
"""Wall-clock Unix seconds; 2^34 s is the year 2514."""
Rate = Annotated[float, Range(0.0, 1e15)]
"""Events per second."""
Index = Annotated[int, Range(0, 1_000_000)]
"""A small ordinal: NUMA node id, GPU index, order, CPU count."""
Name = Annotated[str, MaxLen(253)]
"""A Kubernetes object name or similar identifier (DNS subdomain length)."""
Text = Annotated[str, MaxLen(4096)]
"""A free-form string such as a reason or a cpulist."""
Priority = Annotated[int, Range(-(2**31), 2**31 - 1)]
"""A pod priority, int32 like ``spec.priority``."""

# Lists and maps get explicit caps so a hostile payload cannot make the decoder spin.
MAX_ITEMS: Final = 4096


@dataclass(frozen=True, slots=True)
class Absent:
    """A section or item that could not be measured here, and why (``psi-unsupported``…)."""

    reason: Text


# ---------------------------------------------------------------------------- psi


@dataclass(frozen=True, slots=True, kw_only=True)
class PsiLine:
    """One ``some`` or ``full`` line of a pressure file.

    ``rate_pct`` is the stall share over the last collection interval, from the delta of
    ``total``; it is None on the first sample and after a counter reset.
    """

    avg10_pct: Pct
    avg60_pct: Pct
    avg300_pct: Pct
    total_us: Micros
    rate_pct: Pct | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PsiResource:
    """Pressure of one resource. ``full`` is None where it is undefined (system CPU)."""

    some: PsiLine | None
    full: PsiLine | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PsiGroup:
    """Pressure of one scope: the whole system or one cgroup."""

    path: Text
    cpu: PsiResource | Absent
    memory: PsiResource | Absent
    io: PsiResource | Absent
    irq: PsiResource | Absent


@dataclass(frozen=True, slots=True, kw_only=True)
class PsiSection:
    """System PSI, plus per-QoS cgroup PSI on cgroup v2 (keys: kubepods, burstable, besteffort)."""

    measured_at: UnixTime
    interval_s: Seconds | None
    system: PsiGroup
    cgroups: Annotated[dict[str, PsiGroup | Absent], MaxLen(16)] | Absent


# ------------------------------------------------------------------------ memfrag


@dataclass(frozen=True, slots=True, kw_only=True)
class ZoneFrag:
    """Free memory of one buddy-allocator zone, by contiguity.

    ``free_b_by_order[k]`` is the memory held in free blocks of exactly order k;
    ``unusable_frac_by_order[k]`` is the kernel's unusable-free-space index for an
    order-k allocation (0 = all free memory usable, 1 = none).
    """

    node: Index
    zone: Name
    free_b: Bytes
    free_b_by_order: Annotated[list[Bytes], MaxLen(64)]
    free_b_ge_2mib: Bytes
    free_b_ge_1gib: Bytes
    largest_block_b: Bytes
    unusable_frac_by_order: Annotated[list[Frac], MaxLen(64)]
    low_watermark_b: Bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeContiguity:
    """Contiguity of one NUMA node over the zones ordinary pods allocate from (Normal, Movable)."""

    node: Index
    free_b: Bytes
    free_b_ge_2mib: Bytes
    free_b_ge_1gib: Bytes
    largest_block_b: Bytes
    unusable_2mib_frac: Frac


@dataclass(frozen=True, slots=True, kw_only=True)
class HugepagePool:
    """One hugetlb pool: system-wide (``node`` None) or on one NUMA node."""

    size_b: Bytes
    node: Index | None
    total: Count
    free: Count
    surplus: Count
    reserved: Count | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """Cumulative compaction/THP counters from ``/proc/vmstat`` and their rates.

    ``rates_per_s`` holds d(counter)/dt over the last interval; empty on the first sample.
    """

    counters: Annotated[dict[str, Count], MaxLen(64)]
    rates_per_s: Annotated[dict[str, Rate], MaxLen(64)]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemfragSection:
    """Memory contiguity per zone and per NUMA node, hugepage pools, THP mode, compaction."""

    measured_at: UnixTime
    page_size_b: Bytes
    order_2mib: Index
    order_1gib: Index
    zones: Annotated[list[ZoneFrag], MaxLen(1024)]
    nodes: Annotated[list[NodeContiguity], MaxLen(1024)]
    hugepages: Annotated[list[HugepagePool], MaxLen(1024)] | Absent
    thp_enabled: Name | None
    thp_defrag: Name | None
    compaction: Compaction | Absent


# -------------------------------------------------------------------- allocatable


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeletSettings:
    """The parts of the kubelet configuration file that shape allocatable and alignment."""

    path: Text
    cgroup_driver: Name | None
    cgroups_per_qos: bool
    enforce_node_allocatable: Annotated[list[Name], MaxLen(8)]
    cpu_manager_policy: Name | None
    memory_manager_policy: Name | None
    topology_manager_policy: Name | None
    topology_manager_scope: Name | None
    reserved_system_cpus: Text | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupLimits:
    """Limits and current use of one pods cgroup (kubepods or a QoS child)."""

    path: Text
    memory_limit_b: Bytes | None
    memory_current_b: Bytes | None
    memory_working_set_b: Bytes | None
    cpu_quota_m: MilliCPU | None
    cpu_weight: Annotated[int, Range(1, 262144)] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class KubepodsCgroup:
    """The kubepods cgroup tree as found: version, driver and limits per level."""

    version: Annotated[int, Range(1, 2)]
    driver: Name
    kubepods: CgroupLimits
    qos: Annotated[dict[str, CgroupLimits | Absent], MaxLen(8)]


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuAllocatable:
    """CPU capacity, reservations and what pods can really use, in millicores."""

    capacity_m: MilliCPU
    cpus: Text
    kube_reserved_m: MilliCPU
    system_reserved_m: MilliCPU
    reserved_cpus_m: MilliCPU
    kubelet_allocatable_m: MilliCPU | None
    true_allocatable_m: MilliCPU
    limited_by: Name


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryAllocatable:
    """Memory capacity, reservations, memory held outside pods, and the true allocatable.

    ``true_allocatable_b`` is the smallest of: kubelet's allocatable, the kubepods cgroup
    limit, and capacity minus hugepages, eviction threshold and what non-pod processes and
    the kernel hold now. ``limited_by`` names the term that won.
    """

    capacity_b: Bytes
    hugepages_b: Bytes
    kube_reserved_b: Bytes
    system_reserved_b: Bytes
    eviction_hard_b: Bytes
    kubelet_allocatable_b: Bytes | None
    kubepods_limit_b: Bytes | None
    node_working_set_b: Bytes
    pods_working_set_b: Bytes | None
    non_pod_b: Bytes
    true_allocatable_b: Bytes
    limited_by: Name


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocatableSection:
    measured_at: UnixTime
    cpu: CpuAllocatable
    memory: MemoryAllocatable
    kubelet: KubeletSettings | Absent
    cgroup: KubepodsCgroup | Absent


# --------------------------------------------------------------------------- numa


@dataclass(frozen=True, slots=True, kw_only=True)
class NumaNode:
    """One NUMA node: its CPUs, memory and SLIT distances (index = node id)."""

    node: Index
    cpus: Text
    cpu_count: Index
    mem_total_b: Bytes
    mem_free_b: Bytes
    mem_available_b: Bytes
    distances: Annotated[list[Annotated[int, Range(0, 255)]], MaxLen(1024)]


@dataclass(frozen=True, slots=True, kw_only=True)
class NumaSection:
    measured_at: UnixTime
    nodes: Annotated[list[NumaNode], MaxLen(1024)]


# --------------------------------------------------------------------------- gpus


@dataclass(frozen=True, slots=True, kw_only=True)
class MigDevice:
    """One MIG instance of a GPU."""

    uuid: Name
    gpu_instance_id: Index | None
    compute_instance_id: Index | None
    mem_total_b: Bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuDevice:
    """One GPU as NVML sees it. Fields NVML does not support on this GPU are None.

    ``health`` is ``ok``, ``degraded`` (correctable trouble: pending row remaps,
    retired pages) or ``unhealthy`` (critical XID, uncorrectable ECC, row-remap failure,
    GPU lost); ``health_reasons`` says why, and also lists fields NVML failed to read
    (those alone leave health ``ok``). ``numa_node`` is the CPU-side node from sysfs, what
    kubelet's topology manager aligns to; NVML's own answer only where sysfs has none.
    ``xid_critical`` counts critical XIDs since the agent started (application-level XIDs
    13, 31, 43, 45, 68, 109 excluded); ``last_xid`` is the latest of them.
    """

    index: Index
    uuid: Name
    name: Name
    pci_bus_id: Name
    numa_node: Index | None
    mem_total_b: Bytes | None
    mem_used_b: Bytes | None
    util_gpu_pct: Pct | None
    util_mem_pct: Pct | None
    mig_enabled: bool | None
    mig_devices: Annotated[list[MigDevice], MaxLen(64)]
    ecc_enabled: bool | None
    ecc_uncorrected_volatile: Count | None
    retired_pages_pending: bool | None
    remapped_rows_pending: bool | None
    remapping_failed: bool | None
    nvlinks_active: Index | None
    xid_critical: Count
    last_xid: Count | None
    health: Name
    health_reasons: Annotated[list[Text], MaxLen(32)]


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSection:
    """GPUs and their pairwise links.

    ``topology[i][j]`` is NVML's common-ancestor level between GPUs i and j (0 same board,
    10 one PCIe switch, 20 several switches, 30 host bridge, 40 same NUMA node, 50 across
    sockets; None where unsupported; 0 on the diagonal). ``nvlinks[i][j]`` is the number of
    active NVLinks between i and j: links whose remote end is j directly, or, on NVSwitch
    systems (HGX/DGX) where every link ends at a switch, the smaller of the two GPUs'
    switch-link counts — what ``nvidia-smi topo -m`` shows as ``NV18``. 0 when none.
    """

    measured_at: UnixTime
    driver_version: Name | None
    devices: Annotated[list[GpuDevice], MaxLen(64)]
    topology: Annotated[
        list[Annotated[list[Annotated[int, Range(0, 100)] | None], MaxLen(64)]], MaxLen(64)
    ]
    nvlinks: Annotated[list[Annotated[list[Annotated[int, Range(0, 64)]], MaxLen(64)]], MaxLen(64)]


# -------------------------------------------------------------------------- usage


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuUsage:
    """Node CPU use over the last interval, from ``/proc/stat`` deltas."""

    window_s: Seconds
    used_m: MilliCPU
    used_pct: Pct
    iowait_pct: Pct
    steal_pct: Pct


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryUsage:
    """Node memory in use, page cache kept apart from the working set.

    ``working_set_b`` = used − inactive file cache (cAdvisor's definition, what kubelet
    evicts on); ``page_cache_b`` = file-backed pages (active + inactive file).
    """

    total_b: Bytes
    used_b: Bytes
    working_set_b: Bytes
    page_cache_b: Bytes
    inactive_file_b: Bytes
    available_b: Bytes
    shmem_b: Bytes
    unevictable_b: Bytes
    swap_used_b: Bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageSection:
    measured_at: UnixTime
    cpu: CpuUsage | Absent
    memory: MemoryUsage


# --------------------------------------------------------------------------- pods


@dataclass(frozen=True, slots=True, kw_only=True)
class Resources:
    """Requests or limits of a pod, as the scheduler counts them (init containers, overhead)."""

    cpu_m: MilliCPU
    mem_b: Bytes
    gpu: Count
    hugepages_b: Bytes
    extended: Annotated[dict[str, Count], MaxLen(64)] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PodInfo:
    namespace: Name
    name: Name
    uid: Name
    phase: Name
    qos_class: Name
    priority: Priority
    priority_class: Name | None
    requests: Resources
    limits: Resources
    labels: Annotated[dict[Name, Text], MaxLen(64)]


@dataclass(frozen=True, slots=True, kw_only=True)
class PodsSection:
    """Pods bound to this node; ``source`` is ``apiserver`` or ``kubelet``."""

    measured_at: UnixTime
    source: Name
    pods: Annotated[list[PodInfo], MaxLen(MAX_ITEMS)]


# ------------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeReport:
    """One agent's report for one cycle. ``seq`` grows by one per report from an agent run."""

    schema_version: Annotated[int, Range(SCHEMA_VERSION, SCHEMA_VERSION)]
    node: Name
    agent_version: Name
    seq: Count
    measured_at: UnixTime
    psi: PsiSection | Absent
    memfrag: MemfragSection | Absent
    allocatable: AllocatableSection | Absent
    numa: NumaSection | Absent
    gpus: GpuSection | Absent
    usage: UsageSection | Absent
    pods: PodsSection | Absent


@dataclass(frozen=True, slots=True, kw_only=True)
class Directives:
    """The coordinator's answer to a report: what the node should do until ``ttl_s`` passes.

    ``be_cpu_quota_m`` None means "no throttle, the node's default".
    """

    schema_version: Annotated[int, Range(SCHEMA_VERSION, SCHEMA_VERSION)]
    node: Name
    issued_at: UnixTime
    ttl_s: Seconds
    be_cpu_quota_m: MilliCPU | None = None


SECTIONS: Final = ("psi", "memfrag", "allocatable", "numa", "gpus", "usage", "pods")
"""Report sections in wire order; each is filled by the collector of the same name."""
