"""What an agent's report means for its node's row: the :class:`NodeSignals` it carries.

Only sections that are present count; an absent section leaves its signals unknown. PSI
uses the rate over the agent's last interval where there is one (avg10 lags by ~10 s).
"""

from __future__ import annotations

import math

from common.schema import (
    UNCHANGED,
    AllocatableSection,
    GpuSection,
    MemfragSection,
    NodeReport,
    NumaNode,
    NumaSection,
    PodsSection,
    PsiLine,
    PsiResource,
    PsiSection,
    UsageSection,
    is_absent,
)
from coordinator.state.signals import GpuFault, Links, NodeSignals, NumaZone

_SHARED_LINKS_MAX = 1024
"""Distinct NVLink matrices kept for sharing: a fleet has a few hardware kinds; past this
many the table starts over, so a node reporting a new matrix each time costs no memory."""
_shared_links: dict[Links, Links] = {}


def signals_of(report: NodeReport, previous: NodeSignals | None = None) -> NodeSignals:
    """One per accepted report, so written for speed: no generators, one pass each.
    ``previous``, the node's signals from its last report, supplies the pods' NUMA nodes
    while the agent says its pods section is unchanged (:mod:`agent.reportdelta`)."""
    psi, memfrag, allocatable = report.psi, report.memfrag, report.allocatable
    numa, gpus, usage = report.numa, report.gpus, report.usage
    cpu_pressure = memory_pressure = memory_full = cpu_used = math.nan
    if isinstance(psi, PsiSection):
        cpu_pressure = _pressure(psi.system.cpu)
        memory_pressure = _pressure(psi.system.memory)
        memory = psi.system.memory
        if isinstance(memory, PsiResource) and isinstance(memory.full, PsiLine):
            memory_full = memory.full.avg10_pct
    mem_used = math.nan
    if isinstance(usage, UsageSection):
        if not is_absent(usage.cpu):
            cpu_used = usage.cpu.used_pct
        held = usage.memory
        if held.total_b > 0:
            mem_used = 100.0 * max(0.0, 1.0 - held.available_b / held.total_b)
    contiguous = free = -1
    if isinstance(memfrag, MemfragSection):
        contiguous = sum([n.free_b_ge_2mib for n in memfrag.nodes])
        free = sum([n.free_b for n in memfrag.nodes])
    true_allocatable, topology, scope, reserved = -1, "", "", ""
    if isinstance(allocatable, AllocatableSection):
        true_allocatable = allocatable.memory.true_allocatable_b
        if not is_absent(allocatable.kubelet):
            kubelet = allocatable.kubelet
            topology = kubelet.topology_manager_policy or ""
            scope = kubelet.topology_manager_scope or ""
            reserved = kubelet.reserved_system_cpus or ""
    numa_cpu_m = -1
    zones: tuple[NumaZone, ...] = ()
    if isinstance(numa, NumaSection):
        numa_cpu_m = max([n.cpu_count for n in numa.nodes], default=0) * 1000
        zones = tuple([_zone(n) for n in numa.nodes])
    return NodeSignals(
        measured_at=report.measured_at,
        cpu_pressure_pct=cpu_pressure,
        memory_pressure_pct=memory_pressure,
        memory_full_pct=memory_full,
        cpu_used_pct=cpu_used,
        mem_used_pct=mem_used,
        contiguous_2mib_b=contiguous,
        free_mem_b=free,
        true_allocatable_mem_b=true_allocatable,
        largest_numa_cpu_m=numa_cpu_m,
        gpu_busy=_gpu_busy(gpus) if isinstance(gpus, GpuSection) else math.nan,
        topology_policy=topology,
        topology_scope=scope,
        reserved_cpus=reserved,
        numa=zones,
        gpu_links=_links(gpus.nvlinks) if isinstance(gpus, GpuSection) else None,
        gpu_faults=_gpu_faults(gpus) if isinstance(gpus, GpuSection) else (),
        mig_gpus=_mig_gpus(gpus) if isinstance(gpus, GpuSection) else (),
        gpu_devices=len(gpus.devices) if isinstance(gpus, GpuSection) else -1,
        disks=_disks(usage) if isinstance(usage, UsageSection) else (),
        pod_numa=_pod_numa(report.pods, previous),
        io_pressure_pct=_avg10(psi.system.io) if isinstance(psi, PsiSection) else math.nan,
    )


def _zone(node: NumaNode) -> NumaZone:
    return NumaZone(
        node=node.node,
        cpus=node.cpus,
        cpu_count=node.cpu_count,
        mem_total_b=node.mem_total_b,
        mem_available_b=node.mem_available_b,
        distances=tuple(node.distances),
    )


def _pod_numa(
    pods: PodsSection | str, previous: NodeSignals | None
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Each placed pod's NUMA nodes by uid; the last report's while the section is
    unchanged."""
    if isinstance(pods, PodsSection):
        return tuple([(p.uid, tuple(p.numa_nodes)) for p in pods.pods if p.numa_nodes])
    if pods == UNCHANGED and previous is not None:
        return previous.pod_numa
    return ()


def _disks(usage: UsageSection) -> tuple[tuple[str, float, float], ...]:
    if is_absent(usage.disks):
        return ()
    return tuple((d.name, d.util_pct, d.await_ms) for d in usage.disks)


def _avg10(resource: PsiResource | object) -> float:
    """``some`` avg10 (what thresholds of I/O pressure are stated in); NaN if unknown."""
    if not isinstance(resource, PsiResource) or not isinstance(resource.some, PsiLine):
        return math.nan
    return resource.some.avg10_pct


def _gpu_busy(gpus: GpuSection) -> float:
    """The devices' utilisation summed, in GPUs; NaN when no device's is known."""
    known = [d.util_gpu_pct for d in gpus.devices if d.util_gpu_pct is not None]
    return sum(known) / 100 if known else math.nan


def _mig_gpus(gpus: GpuSection) -> tuple[tuple[bool, tuple[str | None, ...]], ...]:
    """Each GPU's MIG mode and instance profiles, where any GPU has MIG on."""
    if not any(d.mig_enabled for d in gpus.devices):
        return ()
    return tuple(
        (bool(d.mig_enabled), tuple(m.profile for m in d.mig_devices)) for d in gpus.devices
    )


def _gpu_faults(gpus: GpuSection) -> tuple[GpuFault, ...]:
    """The GPUs with anything to judge, as facts; none for a healthy node (the usual case,
    one test per field)."""
    faults = []
    for d in gpus.devices:
        pending = bool(d.remapped_rows_pending or d.retired_pages_pending)
        if not (
            d.xid_recent
            or d.ecc_uncorrected_volatile
            or d.retired_pages
            or pending
            or d.remapping_failed
            or d.lost
        ):
            continue
        faults.append(
            GpuFault(
                index=d.index,
                xids=tuple((x.xid, x.age_s) for x in d.xid_recent),
                ecc_uncorrected=d.ecc_uncorrected_volatile or 0,
                retired_pages=d.retired_pages or 0,
                repair_pending=pending,
                remap_failed=bool(d.remapping_failed),
                lost=d.lost,
            )
        )
    return tuple(faults)


def _pressure(resource: PsiResource | object) -> float:
    """``some`` stall share: the rate over the last interval, else avg10; NaN if unknown."""
    if not isinstance(resource, PsiResource) or not isinstance(resource.some, PsiLine):
        return float("nan")
    line = resource.some
    return line.rate_pct if line.rate_pct is not None else line.avg10_pct


def _links(nvlinks: list[list[int]]) -> Links:
    """The report's NVLink matrix as the one object every node with equal links shares.

    Each node's signals are kept until its next report: built afresh, an 8-GPU matrix is
    ~940 bytes a node (9 MB at 10,000 nodes) for what is, node after node, the same few
    matrices; shared, the state's per-report comparison with the last links is also an
    identity check instead of 64 number comparisons."""
    links = tuple(map(tuple, nvlinks))
    shared = _shared_links.get(links)
    if shared is None:
        if len(_shared_links) >= _SHARED_LINKS_MAX:
            _shared_links.clear()
        shared = _shared_links[links] = links
    return shared
