"""What an agent's report adds to a node's row, and what "unknown" looks like.

The coordinator turns each fresh report into :class:`NodeSignals`; a node with no report,
or one older than its TTL, holds :data:`UNKNOWN` — neutral for every policy, never acted
on (DESIGN §3). The trace simulator has no agents, so all its nodes stay unknown.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

ALIGNING_POLICIES: Final = frozenset({"single-numa-node", "restricted"})
"""kubelet topology manager policies that put a pod with whole CPUs on one NUMA node."""

Links = tuple[tuple[int, ...], ...]
"""NVLinks between each pair of a node's GPUs (row a, column b)."""


class GpuFault(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What the agent reported about one GPU that a health rule may judge; kept only for a
    GPU with any of it, so a healthy node carries none.

    Facts, not a verdict: the thresholds are the coordinator's settings
    (:mod:`coordinator.scoring.gpuhealth`)."""

    index: int
    """The device's index on its node (``nvidia.com/gpu`` devices in NVML order)."""
    xids: tuple[tuple[int, float], ...] = ()
    """The latest critical XIDs and their age in seconds at the report, newest first."""
    ecc_uncorrected: int = 0
    """Uncorrectable ECC errors since the driver was loaded (the volatile count)."""
    retired_pages: int = 0
    """Pages retired for ECC errors."""
    repair_pending: bool = False
    """A row remapping or page retirement waits for the next GPU reset."""
    remap_failed: bool = False
    """Row remapping failed: the GPU ran out of spare rows."""
    lost: bool = False
    """Fell off the bus."""


class NumaZone(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One NUMA node as the agent's report has it (sysfs): what the NodeResourceTopology
    export (:mod:`coordinator.kube.topology`) publishes of it."""

    node: int
    cpus: str
    """Its CPUs as a kernel list (``0-55,112-167``)."""
    cpu_count: int
    mem_total_b: int
    mem_available_b: int
    distances: tuple[int, ...]
    """SLIT distance to each NUMA node by id (10 to itself); empty where unknown."""


class NodeSignals(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Live measurements of one node. NaN / -1 / None mean "not measured".

    A frozen struct rather than a frozen dataclass: one is made per accepted report, and a
    frozen dataclass's ``__init__`` (``object.__setattr__`` per field) costs ~20× more.
    Not tracked by the cyclic GC: it holds only numbers, strings and tuples of ints.
    """

    measured_at: float = math.nan
    """Unix time of the report these come from, by the agent's clock: shown, never used
    to judge freshness (the coordinator times reports by their receipt)."""
    cpu_pressure_pct: float = math.nan
    """CPU PSI ``some`` (share of time runnable tasks waited), 0–100."""
    memory_pressure_pct: float = math.nan
    """Memory PSI ``some``, 0–100: reclaim and compaction stalls."""
    memory_full_pct: float = math.nan
    """Memory PSI ``full`` avg10, 0–100: the share of time every task stalled on memory at
    once — what the pressure-eviction trigger watches."""
    cpu_used_pct: float = math.nan
    """Real CPU use of the whole node over the agent's last interval, 0–100."""
    mem_used_pct: float = math.nan
    """Memory in use on the whole node, 0–100: ``1 − MemAvailable / MemTotal``, what
    node_exporter-based load scores (crane-scheduler's ``mem_usage_active``) measure."""
    contiguous_2mib_b: int = -1
    """Free memory in blocks of 2 MiB or more, over the zones pods allocate from."""
    free_mem_b: int = -1
    """All free memory over the same zones: the whole that ``contiguous_2mib_b`` is a
    share of (shown per node, not scored)."""
    true_allocatable_mem_b: int = -1
    """Memory pods can really use (agent's true allocatable), bytes."""
    largest_numa_cpu_m: int = -1
    """CPUs of the largest NUMA node, millicores: the most a single-NUMA-aligned pod gets."""
    topology_policy: str = ""
    """kubelet's topology manager policy (``single-numa-node``, ``restricted`` …); "" unknown."""
    topology_scope: str = ""
    """kubelet's topology manager scope (``container`` or ``pod``); "" unknown."""
    reserved_cpus: str = ""
    """kubelet's ``reservedSystemCPUs`` (a kernel CPU list); "" none or unknown."""
    numa: tuple[NumaZone, ...] = ()
    """The node's NUMA nodes; empty when not reported."""
    pod_numa: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """The NUMA nodes of each pod the agent placed, by uid (the pods section's
    ``numa_nodes``): a pod left out runs anywhere on the node, as far as is known."""
    gpu_links: Links | None = None
    """Active NVLinks between device pairs (``gpu_links[i][j]``), as the agent saw them."""
    gpu_faults: tuple[GpuFault, ...] = ()
    mig_gpus: tuple[tuple[bool, tuple[str | None, ...]], ...] = ()
    """Per GPU in device order, on a node with any MIG-enabled GPU: whether MIG is on and
    each instance's profile (None where the agent could not name it); empty elsewhere."""
    """The GPUs with anything a health rule judges; empty for a healthy (or unknown) node."""
    disks: tuple[tuple[str, float, float], ...] = ()
    """Each whole disk's name, utilisation (0–100) and await (ms) over the agent's last
    interval; empty when not measured."""
    io_pressure_pct: float = math.nan
    """I/O PSI ``some`` avg10 of the whole node, 0–100: time some task waited on I/O."""
    gpu_devices: int = -1
    """GPUs in the agent's report (-1: no GPU section): the Node may count fewer (the
    device plugin leaves unhealthy ones out of allocatable) or more (time-slicing)."""
    gpu_busy: float = math.nan
    """The GPUs' utilisation summed, in GPUs (two devices at 50 % are 1.0): what the
    node's GPU pods used, for the per-queue cost; NaN when no device's is known."""


UNKNOWN: Final = NodeSignals()
