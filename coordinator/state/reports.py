"""What an agent's report means for its node's row: the :class:`NodeSignals` it carries.

Only sections that are present count; an absent section leaves its signals unknown. PSI
uses the rate over the agent's last interval where there is one (avg10 lags by ~10 s).
"""

from __future__ import annotations

from common.schema import (
    AllocatableSection,
    GpuSection,
    MemfragSection,
    NodeReport,
    NumaSection,
    PsiLine,
    PsiResource,
    PsiSection,
    UsageSection,
    is_absent,
)
from coordinator.state.signals import NodeSignals


def signals_of(report: NodeReport) -> NodeSignals:
    psi = report.psi if isinstance(report.psi, PsiSection) else None
    memfrag = report.memfrag if isinstance(report.memfrag, MemfragSection) else None
    allocatable = report.allocatable if isinstance(report.allocatable, AllocatableSection) else None
    numa = report.numa if isinstance(report.numa, NumaSection) else None
    gpus = report.gpus if isinstance(report.gpus, GpuSection) else None
    usage = report.usage if isinstance(report.usage, UsageSection) else None
    cpu_used = float("nan")
    if usage is not None and not is_absent(usage.cpu):
        cpu_used = usage.cpu.used_pct  # type: ignore[union-attr]
    topology = None
    if allocatable is not None and not is_absent(allocatable.kubelet):
        topology = allocatable.kubelet.topology_manager_policy  # type: ignore[union-attr]
    return NodeSignals(
        measured_at=report.measured_at,
        cpu_pressure_pct=_pressure(psi.system.cpu) if psi else float("nan"),
        memory_pressure_pct=_pressure(psi.system.memory) if psi else float("nan"),
        cpu_used_pct=cpu_used,
        contiguous_2mib_b=sum(n.free_b_ge_2mib for n in memfrag.nodes) if memfrag else -1,
        true_allocatable_mem_b=allocatable.memory.true_allocatable_b if allocatable else -1,
        numa_nodes=len(numa.nodes) if numa else 0,
        largest_numa_cpu_m=max((n.cpu_count for n in numa.nodes), default=0) * 1000 if numa else -1,
        largest_numa_free_mem_b=max((n.mem_available_b for n in numa.nodes), default=0)
        if numa
        else -1,
        topology_policy=topology or "",
        gpu_links=tuple(tuple(row) for row in gpus.nvlinks) if gpus else None,
    )


def _pressure(resource: PsiResource | object) -> float:
    """``some`` stall share: the rate over the last interval, else avg10; NaN if unknown."""
    if not isinstance(resource, PsiResource) or not isinstance(resource.some, PsiLine):
        return float("nan")
    line = resource.some
    return line.rate_pct if line.rate_pct is not None else line.avg10_pct
