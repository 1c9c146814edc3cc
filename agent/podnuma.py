"""Which NUMA nodes each pod's containers may run on, from their cgroups' cpusets.

The coordinator's tenancy rule (:mod:`coordinator.scoring.tenancy`) keeps tenants apart per
NUMA node, so it must know where each pod runs. kubelet's CPU manager writes a container's
CPUs into its cgroup (``cpuset.cpus``; the kernel narrows them to what the parent allows in
``cpuset.cpus.effective`` on cgroup v2, ``cpuset.effective_cpus`` on v1). A pinned
container (``static`` policy, Guaranteed with whole CPUs) holds its own CPUs; every other
container holds the shared pool, which spans the NUMA nodes its CPUs lie on.

A pod's CPUs are the union of its containers' effective cpusets (the pod's own cgroup
where it has no container cgroups yet), mapped onto NUMA nodes through
``/sys/devices/system/node/node<N>/cpulist``: the pod is on every NUMA node one of its CPUs
belongs to.

Bad input reads as *unknown*, never as a guess: a cpuset naming a CPU that no NUMA node of
the node has, a list longer than :data:`MAX_RANGES` ranges or not in the kernel's format,
or a pod with more than :data:`MAX_CONTAINERS` container cgroups. The pod is then reported
without NUMA nodes (``numa_nodes`` None), which the coordinator counts as *every* NUMA node
of the node — the cautious reading for a rule that keeps tenants apart — and a warning names
the file, once per pod. Lists are read as ranges and never expanded CPU by CPU, so a
hostile ``0-1048575`` costs what ``0-3`` does.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent import cgroups
from agent.kernelfiles import CollectorError, parse_cpulist, read_optional, read_text
from common.clock import Clock
from common.schema import MAX_POD_NUMA_NODES, PodInfo

log = logging.getLogger(__name__)

MAX_RANGES: Final = 4096
"""Most ranges (``a-b`` or ``a``) one cpuset may list: one per CPU of a 4,096-CPU host
that has every other CPU, past any machine sold."""
MAX_CONTAINERS: Final = 256
"""Most container cgroups read under one pod: kubelet makes one per container, and a pod
has a few."""
_V2_FILE: Final = "cpuset.cpus.effective"
_V1_FILE: Final = "cpuset.effective_cpus"

Ranges = tuple[tuple[int, int], ...]
"""CPU ids as inclusive ``(first, last)`` ranges."""


class CpusetError(ValueError):
    """A cpuset that cannot be mapped onto the node's NUMA nodes; the message says why."""


def parse_ranges(text: str) -> Ranges:
    """``0-3,8`` → ``((0, 3), (8, 8))`` without expanding them; CpusetError on anything
    else than the kernel's list format or past :data:`MAX_RANGES` ranges."""
    text = text.strip()
    if not text:
        return ()
    parts = text.split(",", MAX_RANGES)
    if len(parts) > MAX_RANGES:
        raise CpusetError(f"more than {MAX_RANGES} ranges")
    out = []
    for part in parts:
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()) or len(lo) > 9 or len(hi) > 9:
            raise CpusetError(f"bad cpu list element {part[:20]!r}")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise CpusetError(f"bad cpu range {part[:20]!r}")
        out.append((first, last))
    return tuple(out)


def numa_nodes_of(cpus: Iterable[tuple[int, int]], numa: NumaMap) -> list[int]:
    """The NUMA nodes the CPU ranges ``cpus`` lie on, sorted; CpusetError when a CPU lies
    on none (the cpuset names a CPU the node lacks). A bisection per range: the NUMA
    map's ranges are sorted and never overlap, so a range costs the ranges it meets."""
    found: set[int] = set()
    for first, last in cpus:
        k = bisect.bisect_right(numa.starts, first) - 1
        at = first
        while at <= last:  # each step covers one NUMA range; the next must go on at once
            if k < 0 or k >= len(numa.ranges) or not numa.ranges[k][0] <= at <= numa.ranges[k][1]:
                raise CpusetError(f"CPU {at} is not on a NUMA node of this host")
            found.add(numa.ranges[k][2])
            at = numa.ranges[k][1] + 1
            k += 1
    return sorted(found)


@dataclass(frozen=True, slots=True)
class NumaMap:
    """The host's CPUs by NUMA node, as sorted non-overlapping ``(first, last, node)``."""

    ranges: tuple[tuple[int, int, int], ...]
    starts: tuple[int, ...]
    """Each range's first CPU, for bisection."""

    @classmethod
    def of(cls, nodes: Iterable[tuple[int, Ranges]]) -> NumaMap:
        """From each NUMA node's CPU ranges; CpusetError if two nodes claim a CPU."""
        ranges = sorted((lo, hi, node) for node, rs in nodes for lo, hi in rs)
        for (_, hi, _), (lo, _, _) in zip(ranges, ranges[1:], strict=False):
            if lo <= hi:
                raise CpusetError(f"CPU {lo} is on two NUMA nodes")
        return cls(tuple(ranges), tuple(r[0] for r in ranges))


class PodNuma:
    """Reads each pod's NUMA nodes every cycle (cpusets change as pinned pods come and go)."""

    def __init__(self, cgroup_root: Path, sys_root: Path, clock: Clock) -> None:
        self._layout = cgroups.LayoutWatch(cgroup_root, clock)
        self._nodes_dir = sys_root / "devices" / "system" / "node"
        self._warned: frozenset[str] = frozenset()

    def numa_nodes(self, pods: Sequence[PodInfo]) -> dict[str, list[int] | None]:
        """Pod uid → its NUMA nodes; None where its cpuset cannot be read or mapped. Empty
        when the host has no kubepods tree or no NUMA nodes in sysfs."""
        layout = self._layout.get()
        numa = self._numa()
        if layout is None or numa is None:
            return {}
        out: dict[str, list[int] | None] = {}
        warned: set[str] = set()
        for pod in pods:
            try:
                nodes = self._pod_nodes(layout, pod, numa)
            except CpusetError as e:
                warned.add(pod.uid)
                if pod.uid not in self._warned:
                    log.warning("pods: NUMA nodes of %s/%s unknown: %s", pod.namespace, pod.name, e)
                nodes = None
            if nodes is not None and len(nodes) > MAX_POD_NUMA_NODES:
                nodes = None  # unknown reads as every NUMA node: the same, and smaller
            out[pod.uid] = nodes
        self._warned = frozenset(warned)
        return out

    def _numa(self) -> NumaMap | None:
        """The host's CPUs by NUMA node; None where sysfs has none (or cannot be read)."""
        try:
            text = read_optional(self._nodes_dir / "online")
            if text is None:
                return None
            return NumaMap.of(
                (i, parse_ranges(read_text(self._nodes_dir / f"node{i}" / "cpulist")))
                for i in parse_cpulist(text)
            )
        except (CollectorError, ValueError) as e:  # CpusetError is a ValueError
            log.warning("pods: NUMA nodes unknown: %s", e)
            return None

    def _pod_nodes(
        self, layout: cgroups.CgroupLayout, pod: PodInfo, numa: NumaMap
    ) -> list[int] | None:
        directory = layout.pod_dir(pod.qos_class, pod.uid, controller="cpuset")
        name = _V2_FILE if layout.version == 2 else _V1_FILE
        if directory is None or not directory.is_dir():
            return None  # pending, gone, or no cpuset controller: not known
        cpus: list[tuple[int, int]] = []
        read = 0
        for child in sorted(directory.iterdir()):
            if not child.is_dir():
                continue
            read += 1
            if read > MAX_CONTAINERS:
                raise CpusetError(f"{directory}: more than {MAX_CONTAINERS} container cgroups")
            cpus.extend(_cpuset(child / name))
        if not read:
            cpus.extend(_cpuset(directory / name))
        if not cpus:
            return None
        try:
            return numa_nodes_of(cpus, numa)
        except CpusetError as e:
            raise CpusetError(f"{directory}: {e}") from e


def _cpuset(path: Path) -> Ranges:
    """The ranges of one cpuset file; none where it does not exist (no cpuset controller
    there); CpusetError naming the file where it cannot be read as one."""
    try:
        text = read_optional(path)
    except CollectorError as e:
        raise CpusetError(str(e)) from e
    if text is None:
        return ()
    try:
        return parse_ranges(text)
    except CpusetError as e:
        raise CpusetError(f"{path}: {e}") from e
