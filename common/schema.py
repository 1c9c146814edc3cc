"""The node report, schema version 1: what an agent tells the coordinator each cycle.

Every section is either its struct or :data:`Absent`: a signal that cannot be measured on
a node is *absent* with a reason, never zero (DESIGN §2). Every section carries
``measured_at`` (Unix seconds), so staleness is explicit (DESIGN §3).

Field types carry their valid range through ``Annotated`` aliases (``Bytes``, ``Pct`` …);
:mod:`common.codec` enforces them on decode, so NaN, negative or absurd quantities never
reach the coordinator. Units are in the names: ``_b`` bytes, ``_m`` millicores, ``_us``
microseconds, ``_s`` seconds, ``_pct`` percent (0–100), ``_frac`` fraction (0–1),
``_at`` Unix time.

On the wire (msgpack, and the JSON ``stowage agent --output json`` prints) a section is a
map keyed by field name, and an absent section or item is just its reason: a non-empty
string such as ``"psi-unsupported: …"``. The types are ``msgspec`` structs so that the
coordinator decodes and validates a report in one typed pass, several times faster than
generic decoding plus a validating walk. Such a decoder picks a union member by wire type
and cannot tell two map types apart, so an absent marker cannot be a map next to the
section it stands for; a string can. Test for it with :func:`is_absent`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Final, NewType

import msgspec
from msgspec import Meta

if TYPE_CHECKING:  # typing.TypeIs from Python 3.13; only the type checker reads it here
    from typing_extensions import TypeIs

SCHEMA_VERSION: Final = 1

_PIB: Final = 2**50
Bytes = Annotated[int, Meta(ge=0, le=_PIB)]
"""A byte amount; 1 PiB on one node is absurd, so it is the ceiling."""
MilliCPU = Annotated[int, Meta(ge=0, le=100_000_000)]
"""Millicores; 100 000 cores on one node is the ceiling."""
Pct = Annotated[float, Meta(ge=0.0, le=100.0)]
Frac = Annotated[float, Meta(ge=0.0, le=1.0)]
Micros = Annotated[int, Meta(ge=0, le=2**63 - 1)]
"""A cumulative microsecond counter (PSI ``total``)."""
Count = Annotated[int, Meta(ge=0, le=2**63 - 1)]
Seconds = Annotated[float, Meta(ge=0.0, le=10.0**9)]
UnixTime = Annotated[float, Meta(ge=0.0, le=2.0**34)]
"""Wall-clock Unix seconds; 2^34 s is the year 2514."""
Rate = Annotated[float, Meta(ge=0.0, le=1e15)]
"""Events per second."""
Index = Annotated[int, Meta(ge=0, le=1_000_000)]
"""A small ordinal: NUMA node id, GPU index, order, CPU count."""
Name = Annotated[str, Meta(max_length=253)]
"""A Kubernetes object name or similar identifier (DNS subdomain length)."""
MAX_TEXT: Final = 4096
"""The longest :data:`Text`."""
Text = Annotated[str, Meta(max_length=MAX_TEXT)]
"""A free-form string such as a reason, a cpulist or a map key."""
Priority = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
"""A pod priority, int32 like ``spec.priority``."""
Version = Annotated[int, Meta(ge=SCHEMA_VERSION, le=SCHEMA_VERSION)]
"""The schema version a payload is written in; this build reads only its own."""

# Every float above is bounded on both sides: a bound is what makes the decoder refuse
# NaN and infinities (NaN compares false with any bound). Lists and maps get explicit caps
# so a hostile payload cannot make the decoder spin.
MAX_ITEMS: Final = 4096

Absent = NewType("Absent", Annotated[str, Meta(min_length=1, max_length=4096)])
"""A section or item that could not be measured here: the reason why (``psi-unsupported``…)."""


def is_absent(value: object) -> TypeIs[Absent]:
    """Whether a section or item is absent. Only :data:`Absent` is a string where a struct,
    list or map is expected, so the type alone says it (and, to the type checker, what the
    value is when it is not)."""
    return isinstance(value, str)


UNCHANGED: Final = Absent("unchanged")
"""The pods section's absent reason while it equals the one last delivered: the agent sends
it between whole reports, and the coordinator keeps the pods (and their NUMA placements)
it had for the node."""


class _Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Base of every schema struct: immutable, built by keyword, and strict on decode (a
    key that is no field is an error, not silently dropped).

    Not tracked by the cyclic garbage collector (``gc=False``): a report is a tree of
    immutable records that cannot form a cycle, and a coordinator decoding thousands a
    second otherwise hands the collector thousands of objects to walk — in the ingest
    benchmark that meant collections stopping the process for up to 90 ms."""


# ---------------------------------------------------------------------------- psi


class PsiLine(_Record, frozen=True):
    """One ``some`` or ``full`` line of a pressure file.

    ``rate_pct`` is the stall share over the last collection interval, from the delta of
    ``total``; it is None on the first sample and after a counter reset.
    """

    avg10_pct: Pct
    avg60_pct: Pct
    avg300_pct: Pct
    total_us: Micros
    rate_pct: Pct | None = None


class PsiResource(_Record, frozen=True):
    """Pressure of one resource. ``full`` is None where it is undefined (system CPU)."""

    some: PsiLine | None
    full: PsiLine | None


class PsiGroup(_Record, frozen=True):
    """Pressure of one scope: the whole system or one cgroup."""

    path: Text
    cpu: PsiResource | Absent
    memory: PsiResource | Absent
    io: PsiResource | Absent
    irq: PsiResource | Absent


class PsiSection(_Record, frozen=True):
    """System PSI, plus per-QoS cgroup PSI on cgroup v2 (keys: kubepods, burstable, besteffort)."""

    measured_at: UnixTime
    interval_s: Seconds | None
    system: PsiGroup
    cgroups: Annotated[dict[Text, PsiGroup | Absent], Meta(max_length=16)] | Absent


# ------------------------------------------------------------------------ memfrag


class ZoneFrag(_Record, frozen=True):
    """Free memory of one buddy-allocator zone, by contiguity.

    ``free_b_by_order[k]`` is the memory held in free blocks of exactly order k;
    ``unusable_frac_by_order[k]`` is the kernel's unusable-free-space index for an
    order-k allocation (0 = all free memory usable, 1 = none).
    """

    node: Index
    zone: Name
    free_b: Bytes
    free_b_by_order: Annotated[list[Bytes], Meta(max_length=64)]
    free_b_ge_2mib: Bytes
    free_b_ge_1gib: Bytes
    largest_block_b: Bytes
    unusable_frac_by_order: Annotated[list[Frac], Meta(max_length=64)]
    low_watermark_b: Bytes | None = None


class NodeContiguity(_Record, frozen=True):
    """Contiguity of one NUMA node over the zones ordinary pods allocate from (Normal, Movable)."""

    node: Index
    free_b: Bytes
    free_b_ge_2mib: Bytes
    free_b_ge_1gib: Bytes
    largest_block_b: Bytes
    unusable_2mib_frac: Frac


class HugepagePool(_Record, frozen=True):
    """One hugetlb pool: system-wide (``node`` None) or on one NUMA node."""

    size_b: Bytes
    node: Index | None
    total: Count
    free: Count
    surplus: Count
    reserved: Count | None = None


class Compaction(_Record, frozen=True):
    """Cumulative compaction/THP counters from ``/proc/vmstat`` and their rates.

    ``rates_per_s`` holds d(counter)/dt over the last interval; empty on the first sample.
    """

    counters: Annotated[dict[Text, Count], Meta(max_length=64)]
    rates_per_s: Annotated[dict[Text, Rate], Meta(max_length=64)]


class MemfragSection(_Record, frozen=True):
    """Memory contiguity per zone and per NUMA node, hugepage pools, THP mode, compaction.

    ``nodes`` is the summary the coordinator acts on and is in every report; ``zones``,
    ``hugepages`` and ``compaction`` are its detail and may be absent with the reason
    ``refresh-only`` (sent with whole reports only: :mod:`agent.reportdelta`).
    """

    measured_at: UnixTime
    page_size_b: Bytes
    order_2mib: Index
    order_1gib: Index
    zones: Annotated[list[ZoneFrag], Meta(max_length=1024)] | Absent
    nodes: Annotated[list[NodeContiguity], Meta(max_length=1024)]
    hugepages: Annotated[list[HugepagePool], Meta(max_length=1024)] | Absent
    thp_enabled: Name | None
    thp_defrag: Name | None
    compaction: Compaction | Absent


# -------------------------------------------------------------------- allocatable


class KubeletSettings(_Record, frozen=True):
    """The parts of the kubelet configuration file that shape allocatable and alignment."""

    path: Text
    cgroup_driver: Name | None
    cgroups_per_qos: bool
    enforce_node_allocatable: Annotated[list[Name], Meta(max_length=8)]
    cpu_manager_policy: Name | None
    memory_manager_policy: Name | None
    topology_manager_policy: Name | None
    topology_manager_scope: Name | None
    reserved_system_cpus: Text | None


class CgroupLimits(_Record, frozen=True):
    """Limits and current use of one pods cgroup (kubepods or a QoS child)."""

    path: Text
    memory_limit_b: Bytes | None
    memory_current_b: Bytes | None
    memory_working_set_b: Bytes | None
    cpu_quota_m: MilliCPU | None
    cpu_weight: Annotated[int, Meta(ge=1, le=262144)] | None


class KubepodsCgroup(_Record, frozen=True):
    """The kubepods cgroup tree as found: version, driver and limits per level."""

    version: Annotated[int, Meta(ge=1, le=2)]
    driver: Name
    kubepods: CgroupLimits
    qos: Annotated[dict[Text, CgroupLimits | Absent], Meta(max_length=8)]


class CpuAllocatable(_Record, frozen=True):
    """CPU capacity, reservations and what pods can really use, in millicores."""

    capacity_m: MilliCPU
    cpus: Text
    kube_reserved_m: MilliCPU
    system_reserved_m: MilliCPU
    reserved_cpus_m: MilliCPU
    kubelet_allocatable_m: MilliCPU | None
    true_allocatable_m: MilliCPU
    limited_by: Name


class MemoryAllocatable(_Record, frozen=True):
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


class AllocatableSection(_Record, frozen=True):
    measured_at: UnixTime
    cpu: CpuAllocatable
    memory: MemoryAllocatable
    kubelet: KubeletSettings | Absent
    cgroup: KubepodsCgroup | Absent


# --------------------------------------------------------------------------- numa


class NumaNode(_Record, frozen=True):
    """One NUMA node: its CPUs, memory and SLIT distances (index = node id)."""

    node: Index
    cpus: Text
    cpu_count: Index
    mem_total_b: Bytes
    mem_free_b: Bytes
    mem_available_b: Bytes
    distances: Annotated[list[Annotated[int, Meta(ge=0, le=255)]], Meta(max_length=1024)]


class NumaSection(_Record, frozen=True):
    measured_at: UnixTime
    nodes: Annotated[list[NumaNode], Meta(max_length=1024)]


# --------------------------------------------------------------------------- gpus


class MigDevice(_Record, frozen=True, omit_defaults=True):
    """One MIG instance of a GPU. The fields with defaults came later and are left off the
    wire while they hold them, so a report without them reads the same to an older
    coordinator."""

    uuid: Name
    gpu_instance_id: Index | None
    compute_instance_id: Index | None
    mem_total_b: Bytes | None
    profile: Name | None = None
    """Its profile as the NVIDIA device plugin names it (``3g.40gb``, ``1g.10gb+me``,
    ``1c.2g.20gb`` where the compute instance is smaller than the GPU instance), from
    NVML's GPU- and compute-instance profiles; None where NVML does not say."""
    placement_start: Index | None = None
    """The first memory slice its GPU instance spans (NVML's placement start)."""


MAX_RECENT_XIDS: Final = 16
"""Most recent critical XIDs one GPU report lists; a GPU in an XID storm is unhealthy on
the first, and the count since start (``xid_critical``) keeps the rest."""


class XidSeen(_Record, frozen=True, array_like=True):
    """A critical XID and how long before the report the agent saw it (by its monotonic
    clock, so that neither side's wall clock matters)."""

    xid: Count
    age_s: Seconds


class GpuDevice(_Record, frozen=True, omit_defaults=True):
    """One GPU as NVML sees it. Fields NVML does not support on this GPU are None.

    ``health`` is ``ok``, ``degraded`` (correctable trouble: pending row remaps,
    retired pages) or ``unhealthy`` (critical XID, uncorrectable ECC, row-remap failure,
    GPU lost); ``health_reasons`` says why, and also lists fields NVML failed to read
    (those alone leave health ``ok``). ``numa_node`` is the CPU-side node, what kubelet's
    topology manager aligns to: from sysfs, else the one node NVML's memory affinity names.
    ``xid_critical`` counts critical XIDs since the agent started (application-level XIDs
    13, 31, 43, 45, 68, 109 excluded); ``last_xid`` is the latest of them.

    The fields with defaults came later and are left off the wire while they hold them, so
    a report without them reads the same to an older coordinator.
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
    mig_devices: Annotated[list[MigDevice], Meta(max_length=64)]
    ecc_enabled: bool | None
    ecc_uncorrected_volatile: Count | None
    retired_pages_pending: bool | None
    remapped_rows_pending: bool | None
    remapping_failed: bool | None
    nvlinks_active: Index | None
    xid_critical: Count
    last_xid: Count | None
    health: Name
    health_reasons: Annotated[list[Text], Meta(max_length=32)]
    xid_recent: Annotated[list[XidSeen], Meta(max_length=MAX_RECENT_XIDS)] = msgspec.field(
        default_factory=list
    )
    """The latest critical XIDs, newest first, with their age: what a recent-window rule
    judges (``xid_critical`` alone cannot tell an XID of a minute ago from one of last
    month)."""
    retired_pages: Count | None = None
    """Pages retired for ECC errors (single-bit and double-bit causes together); None
    where the GPU does not retire pages (row remapping replaced it from Ampere on)."""
    lost: bool = False
    """The GPU fell off the bus (``GpuIsLost`` from NVML)."""


class GpuSection(_Record, frozen=True):
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
    devices: Annotated[list[GpuDevice], Meta(max_length=64)]
    topology: Annotated[
        list[Annotated[list[Annotated[int, Meta(ge=0, le=100)] | None], Meta(max_length=64)]],
        Meta(max_length=64),
    ]
    nvlinks: Annotated[
        list[Annotated[list[Annotated[int, Meta(ge=0, le=64)]], Meta(max_length=64)]],
        Meta(max_length=64),
    ]

    def __post_init__(self) -> None:
        """Refuse matrices that are not one row and one column per device, and device
        indices that are not 0 … n−1 once each: the coordinator reads ``nvlinks[a][b]``
        for the devices it places a pod on, so a ragged or short matrix would fail every
        multi-GPU decision for the node. Raised on decode, this becomes the decoder's
        error at ``gpus`` (``gpus: nvlinks[1]: 3 entries for 2 devices``)."""
        n = len(self.devices)
        matrices: dict[str, Sequence[Sequence[int | None]]] = {
            "topology": self.topology,
            "nvlinks": self.nvlinks,
        }
        for name, matrix in matrices.items():
            if len(matrix) != n:
                raise ValueError(f"{name}: {len(matrix)} rows for {n} devices")
            for i, row in enumerate(matrix):
                if len(row) != n:
                    raise ValueError(f"{name}[{i}]: {len(row)} entries for {n} devices")
        seen: set[int] = set()
        for k, device in enumerate(self.devices):
            if device.index >= n or device.index in seen:
                raise ValueError(
                    f"devices[{k}].index: {device.index} is not one of 0..{n - 1} once each"
                )
            seen.add(device.index)


# -------------------------------------------------------------------------- usage


class CpuUsage(_Record, frozen=True):
    """Node CPU use over the last interval, from ``/proc/stat`` deltas."""

    window_s: Seconds
    used_m: MilliCPU
    used_pct: Pct
    iowait_pct: Pct
    steal_pct: Pct


class MemoryUsage(_Record, frozen=True):
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


MAX_DISKS: Final = 256
"""Most disks one report lists (whole block devices; partitions and loop devices are not)."""


class DiskUsage(_Record, frozen=True):
    """One whole disk over the last interval, from ``/proc/diskstats`` deltas, as ``iostat
    -x`` computes them."""

    name: Name
    util_pct: Pct
    """Share of the interval the disk had I/O in flight (``io_ticks``); near 100 % a disk
    that serves one request at a time is saturated (parallel devices such as NVMe may
    serve more)."""
    await_ms: Annotated[float, Meta(ge=0.0, le=1e9)]
    """Average time a completed request took, queueing included (``iostat``'s ``await``:
    read, write and discard ticks over the requests completed); 0 with none completed."""
    iops: Rate
    """Requests completed a second."""


class UsageSection(_Record, frozen=True, omit_defaults=True):
    """What the node uses. ``disks`` came later: left off the wire while empty."""

    measured_at: UnixTime
    cpu: CpuUsage | Absent
    memory: MemoryUsage
    disks: Annotated[list[DiskUsage], Meta(max_length=MAX_DISKS)] | Absent = msgspec.field(
        default_factory=list
    )
    """Each whole disk's use over the last interval; absent on the first sample or where
    ``/proc/diskstats`` cannot be read."""


# --------------------------------------------------------------------------- pods


class Resources(_Record, frozen=True):
    """Requests or limits of a pod, as the scheduler counts them (init containers, overhead)."""

    cpu_m: MilliCPU
    mem_b: Bytes
    gpu: Count
    hugepages_b: Bytes
    extended: Annotated[dict[Text, Count], Meta(max_length=64)] = msgspec.field(
        default_factory=dict
    )


class PodUsage(_Record, frozen=True, array_like=True):
    """Measured from the pod's own cgroup, this cycle: what the colocation controller reads
    to tell latency-sensitive stall from best-effort use.

    Sent every report for every pod (:attr:`NodeReport.pod_usage`), so it goes on the wire
    as a three-item array rather than a map: the field names would be most of its bytes."""

    cpu_m: MilliCPU | None
    """CPU used over the last interval (``cpuacct.usage`` / ``cpu.stat usage_usec`` delta);
    None on the first sample, when there is no delta yet."""
    cpu_some_avg10_pct: Pct | None
    """The pod cgroup's ``cpu.pressure`` "some avg10" (v2 or the hybrid unified tree); None
    where the kernel keeps no per-cgroup PSI."""
    cpu_some_rate_pct: Pct | None
    """The same stall share from the ``total`` delta since the last cycle (as
    :attr:`PsiLine.rate_pct` is for system PSI)."""


MAX_POD_NUMA_NODES: Final = 64
"""Most NUMA nodes one pod's entry lists (eight sockets of sub-NUMA clustering are 32); a
pod on more is reported without them, which reads as every NUMA node of its node."""


class PodInfo(_Record, frozen=True, omit_defaults=True):
    """One pod bound to the node. New fields have defaults and are left off the wire while
    they hold them, so a report without them reads the same to an older coordinator."""

    namespace: Name
    name: Name
    uid: Name
    phase: Name
    qos_class: Name
    priority: Priority
    priority_class: Name | None
    requests: Resources
    limits: Resources
    labels: Annotated[dict[Name, Text], Meta(max_length=64)]
    static: bool = False
    """A static pod (the kubelet runs it from a file or URL) or its mirror on the API
    server: node infrastructure, never best-effort (:mod:`common.qos`)."""
    numa_nodes: Annotated[list[Index], Meta(max_length=MAX_POD_NUMA_NODES)] | None = None
    """The NUMA nodes its containers may run on (their cgroups' effective cpusets,
    :mod:`agent.podnuma`); None where not known, which counts as every NUMA node."""


class PodsSection(_Record, frozen=True):
    """Pods bound to this node; ``source`` is ``apiserver`` or ``kubelet``."""

    measured_at: UnixTime
    source: Name
    pods: Annotated[list[PodInfo], Meta(max_length=MAX_ITEMS)]


# ------------------------------------------------------------------------- report


class Enforcement(_Record, frozen=True):
    """What the agent's enforcer has applied now, reported every cycle, so the coordinator
    (and ``/debug``) see the node's actual state rather than the directive it was sent."""

    be_cpu_quota_m: MilliCPU | None
    """Applied now; None = the node's defaults (nothing changed)."""
    source: Name
    """``coordinator``, ``local`` (the agent's fast path) or ``default``."""
    applied_at: UnixTime | None
    """When the current value was applied."""
    local_actions: Count
    """Agent-local tightenings since the agent started."""
    error: Text | None = None
    """The last enforcement failure, if any."""


class NodeReport(_Record, frozen=True, omit_defaults=True):
    """One agent's report for one cycle. ``seq`` grows by one per report from an agent run.

    ``enforcement`` and ``pod_usage`` have defaults and are left off the wire while they
    hold them, so a report from an agent without them is byte-for-byte what it was."""

    schema_version: Version
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
    enforcement: Enforcement | None = None
    pod_usage: Annotated[dict[Name, PodUsage], Meta(max_length=MAX_ITEMS)] | Absent | None = None
    """Each pod's measured use this cycle, by pod UID; only pods whose cgroup was read.

    Kept out of the pods section because it changes every cycle and the pods section does
    not: with it inside, the section would differ from the last one delivered each time
    and could never go as ``unchanged`` (:mod:`agent.reportdelta`). None: the agent does
    not measure it (an older agent, or no pods section); absent: it could not this cycle."""


MAX_BE_PODS: Final = 512
"""Most best-effort pod UIDs one directive names; beyond kubelet's default 110 pods a node
with more is misconfigured, and the cap bounds the agent's reply buffer."""


class LocalBounds(_Record, frozen=True):
    """What the agent may do alone, at once, between two reports (the fast path)."""

    pressure_high_pct: Pct
    """LS cpu "some" stall share over ``window_s`` at or above which the agent tightens."""
    window_s: Seconds
    """The window the agent measures LS stall over (e.g. 1.0)."""
    quota_m: MilliCPU
    """The BE quota the agent applies alone: at least the floor, at most the directive's."""
    hold_s: Seconds
    """How long a local tightening lasts without the coordinator confirming it."""


class Directives(_Record, frozen=True, omit_defaults=True):
    """The coordinator's answer to a report: what the node should do until ``ttl_s`` passes.

    ``be_cpu_quota_m`` None means "no throttle, the node's default". Fields at their
    defaults are left off the wire, so an unthrottled answer is what it always was and an
    agent built before colocation still reads it.
    """

    schema_version: Version
    node: Name
    issued_at: UnixTime
    ttl_s: Seconds
    be_cpu_quota_m: MilliCPU | None = None
    be_reason: Text = ""
    """Why ``be_cpu_quota_m`` is what it is (shown in events, annotations and explain)."""
    be_pods: Annotated[list[Name], Meta(max_length=MAX_BE_PODS)] = msgspec.field(
        default_factory=list
    )
    """UIDs of this node's BE pods the quota applies to."""
    local: LocalBounds | None = None
    """Bounds for the agent's fast path; None: the agent must not act alone."""


SECTIONS: Final = ("psi", "memfrag", "allocatable", "numa", "gpus", "usage", "pods")
"""Report sections in wire order; each is filled by the collector of the same name."""
