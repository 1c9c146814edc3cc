"""NUMA topology from sysfs: which CPUs and how much memory each node has, and distances.

Kubelet's topology manager (``single-numa-node``/``restricted``) rejects a pod at
admission when no single NUMA node can hold it, after the scheduler has already placed
it; the coordinator needs per-node CPUs and free memory to avoid that. Available memory
per node has no kernel field; it is estimated as MemFree + file pages + reclaimable slab,
as Koordinator does. Hugepage pools per node are reported by the memfrag collector.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from agent.collectors.base import NoData
from agent.kernelfiles import CollectorError, parse_cpulist, parse_meminfo, read_text
from agent.settings import AgentSettings
from common.clock import Clock
from common.schema import NumaNode, NumaSection

NAME: Final = "numa"


class NumaCollector:
    name = NAME

    def __init__(self, sys: Path, clock: Clock) -> None:
        self._root = sys / "devices" / "system" / "node"
        self._clock = clock

    def collect(self) -> NumaSection:
        if not self._root.is_dir():
            raise NoData("numa-unsupported: no /sys/devices/system/node (kernel without NUMA)")
        online = self._root / "online"
        try:
            ids = parse_cpulist(read_text(online))
        except ValueError as e:
            raise CollectorError(f"parse {online}: {e}") from e
        if not ids:
            raise CollectorError(f"{online}: no online NUMA node")
        nodes = [self._node(i, len(ids)) for i in ids]
        return NumaSection(measured_at=self._clock.wall(), nodes=nodes)

    def _node(self, node: int, count: int) -> NumaNode:
        directory = self._root / f"node{node}"
        try:
            cpus_text = read_text(directory / "cpulist").strip()
            cpus = parse_cpulist(cpus_text)
            mem = parse_meminfo(read_text(directory / "meminfo"))
            distances = [int(d) for d in read_text(directory / "distance").split()]
        except ValueError as e:
            raise CollectorError(f"parse {directory}: {e}") from e
        if len(distances) < count:
            raise CollectorError(
                f"{directory / 'distance'}: {len(distances)} entries for {count} nodes"
            )
        try:
            total, free = mem["MemTotal"], mem["MemFree"]
        except KeyError as e:
            raise CollectorError(f"{directory / 'meminfo'}: no {e.args[0]}") from e
        reclaimable = sum(mem.get(k, 0) for k in ("Active(file)", "Inactive(file)", "SReclaimable"))
        return NumaNode(
            node=node,
            cpus=cpus_text,
            cpu_count=len(cpus),
            mem_total_b=total,
            mem_free_b=free,
            mem_available_b=min(total, free + reclaimable),
            distances=distances,
        )


def build(settings: AgentSettings, clock: Clock) -> NumaCollector:
    return NumaCollector(settings.paths.sys, clock)
