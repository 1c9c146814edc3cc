"""Memory contiguity: how much free memory sits in blocks big enough to be useful.

Total free memory says nothing about whether a 2 MiB hugepage or THP can be allocated;
the buddy allocator's free lists do. From ``/proc/buddyinfo`` (free block counts per
order, per NUMA node and zone) this computes, with the page size P and orders derived
from it (order of 2 MiB = log2(2 MiB / P)):

* free bytes per order and in blocks ≥ 2 MiB and ≥ 1 GiB (the latter is 0 on x86-64's
  default ``MAX_PAGE_ORDER`` of 10: a 1 GiB page never comes from one buddy block),
* the largest free block,
* the kernel's *unusable free space index* per order j (``mm/vmstat.c``):
  ``(free_pages − suitable_blocks(j)·2^j) / free_pages``, 1 when nothing is free.

It adds hugetlb pools (system-wide and per NUMA node), the THP mode, the low
watermarks from ``/proc/zoneinfo`` and compaction/THP counters from ``/proc/vmstat``
with their rates: compaction stalls are how fragmentation turns into latency.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent.collectors.base import NoData
from agent.kernelfiles import CollectorError, parse_choice, parse_flat_counters, read_text
from agent.settings import AgentSettings
from common.clock import Clock
from common.schema import (
    Absent,
    Compaction,
    HugepagePool,
    MemfragSection,
    NodeContiguity,
    ZoneFrag,
)

NAME: Final = "memfrag"
MIB2: Final = 2 << 20
GIB1: Final = 1 << 30
# Zones ordinary (movable, user) allocations come from; DMA/DMA32 only by fallback.
POD_ZONES: Final = ("Normal", "Movable", "HighMem")
COMPACTION_COUNTERS: Final = (
    "compact_stall",
    "compact_fail",
    "compact_success",
    "compact_migrate_scanned",
    "compact_free_scanned",
    "compact_isolated",
    "compact_daemon_wake",
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "pgmigrate_success",
    "pgmigrate_fail",
    "allocstall_normal",
    "allocstall_movable",
    "pgscan_direct",
)
WATERMARK_REFRESH_S: Final = 300.0
_BUDDY_LINE: Final = re.compile(r"Node\s+(\d+),\s+zone\s+(\S+)((?:\s+\d+)+)\s*")
_ZONEINFO_HEAD: Final = re.compile(r"^Node\s+(\d+),\s+zone\s+(\S+)\s*$")
_HUGEPAGE_DIR: Final = re.compile(r"hugepages-(\d+)kB")


@dataclass(frozen=True, slots=True)
class BuddyZone:
    node: int
    zone: str
    counts: tuple[int, ...]
    """Free blocks per order: ``counts[k]`` blocks of 2^k pages."""


def parse_buddyinfo(text: str) -> list[BuddyZone]:
    """Parse ``/proc/buddyinfo``; raise ValueError on a malformed or truncated file.

    The kernel writes every line with the same number of orders and ends the file with a
    newline, so a ragged line or a missing final newline means a truncated read.
    """
    if not text.endswith("\n"):
        raise ValueError("truncated: no final newline")
    zones = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _BUDDY_LINE.fullmatch(line)
        if match is None:
            raise ValueError(f"unexpected line {line[:60]!r}")
        counts = tuple(int(c) for c in match.group(3).split())
        zones.append(BuddyZone(int(match.group(1)), match.group(2), counts))
    if not zones:
        raise ValueError("no zones")
    if len({len(z.counts) for z in zones}) != 1:
        raise ValueError("zones disagree on the number of orders (truncated line?)")
    return zones


def free_pages(counts: tuple[int, ...]) -> int:
    return sum(c << k for k, c in enumerate(counts))


def pages_at_or_above(counts: tuple[int, ...], order: int) -> int:
    """Pages sitting in free blocks of order ≥ ``order``."""
    return sum(c << k for k, c in enumerate(counts) if k >= order)


def unusable_index(counts: tuple[int, ...], order: int) -> float:
    """The kernel's unusable free space index for an order-``order`` allocation.

    Blocks of order ≥ j can serve ``c·2^(k−j)`` order-j requests each; what lies in smaller
    blocks is unusable for it. (The kernel prints this truncated to thousandths.)
    """
    total = free_pages(counts)
    if total == 0:
        return 1.0
    suitable = sum(c << (k - order) for k, c in enumerate(counts) if k >= order)
    return (total - (suitable << order)) / total


def unusable_indices(counts: tuple[int, ...]) -> list[float]:
    """:func:`unusable_index` for every order, in one pass.

    ``suitable(j) << j`` is exactly the pages held in blocks of order ≥ j, so the index
    is the share of free pages below order j: a running sum from order 0 gives them all.
    """
    total = free_pages(counts)
    if total == 0:
        return [1.0] * len(counts)
    out, below = [], 0
    for k, c in enumerate(counts):
        out.append(below / total)
        below += c << k
    return out


def largest_block_pages(counts: tuple[int, ...]) -> int:
    orders = [k for k, c in enumerate(counts) if c > 0]
    return 1 << orders[-1] if orders else 0


def parse_zoneinfo_low(text: str) -> dict[tuple[int, str], int]:
    """Low watermark (pages) per (node, zone) from ``/proc/zoneinfo``."""
    out: dict[tuple[int, str], int] = {}
    current: tuple[int, str] | None = None
    for line in text.splitlines():
        head = _ZONEINFO_HEAD.match(line)
        if head:
            current = (int(head.group(1)), head.group(2))
            continue
        parts = line.split()
        if current is not None and len(parts) == 2 and parts[0] == "low":
            out[current] = int(parts[1])
            current = None
    return out


class MemfragCollector:
    """Contiguity per zone and NUMA node, hugepage pools, THP mode and compaction."""

    name = NAME

    def __init__(self, proc: Path, sys: Path, clock: Clock, page_size_b: int | None = None):
        self._proc = proc
        self._sys = sys
        self._clock = clock
        self._page = page_size_b or os.sysconf("SC_PAGE_SIZE")
        self._prev_counters: tuple[float, dict[str, int]] | None = None
        self._watermarks: tuple[float, dict[tuple[int, str], int]] | None = None
        self._pool_dirs: list[_PoolDir] | None = None

    def collect(self) -> MemfragSection:
        path = self._proc / "buddyinfo"
        if not path.exists():
            raise NoData("buddyinfo-unavailable: kernel exposes no /proc/buddyinfo")
        try:
            buddy = parse_buddyinfo(read_text(path))
        except ValueError as e:
            raise CollectorError(f"parse {path}: {e}") from e
        page = self._page
        order_2m = (MIB2 // page).bit_length() - 1
        order_1g = (GIB1 // page).bit_length() - 1
        low = self._low_watermarks()
        zones = [
            ZoneFrag(
                node=z.node,
                zone=z.zone,
                free_b=free_pages(z.counts) * page,
                free_b_by_order=[(c << k) * page for k, c in enumerate(z.counts)],
                free_b_ge_2mib=pages_at_or_above(z.counts, order_2m) * page,
                free_b_ge_1gib=pages_at_or_above(z.counts, order_1g) * page,
                largest_block_b=largest_block_pages(z.counts) * page,
                unusable_frac_by_order=unusable_indices(z.counts),
                low_watermark_b=low[(z.node, z.zone)] * page if (z.node, z.zone) in low else None,
            )
            for z in buddy
        ]
        return MemfragSection(
            measured_at=self._clock.wall(),
            page_size_b=page,
            order_2mib=order_2m,
            order_1gib=order_1g,
            zones=zones,
            nodes=_per_node(buddy, page, order_2m, order_1g),
            hugepages=self._hugepages(),
            thp_enabled=self._choice("enabled"),
            thp_defrag=self._choice("defrag"),
            compaction=self._compaction(),
        )

    def _low_watermarks(self) -> dict[tuple[int, str], int]:
        """Low watermarks, re-read every WATERMARK_REFRESH_S.

        ``/proc/zoneinfo`` is the largest file the agent reads (it lists per-CPU page sets:
        thousands of lines on big nodes), while watermarks change only when
        ``min_free_kbytes`` or memory hotplug changes them.
        """
        now = self._clock.monotonic()
        if self._watermarks is not None and now - self._watermarks[0] < WATERMARK_REFRESH_S:
            return self._watermarks[1]
        try:
            low = parse_zoneinfo_low(read_text(self._proc / "zoneinfo"))
        except (CollectorError, ValueError):
            low = {}  # watermarks are an extra; contiguity stands without them
        self._watermarks = (now, low)
        return low

    def _hugepages(self) -> list[HugepagePool] | Absent:
        system_dir = self._sys / "kernel" / "mm" / "hugepages"
        if not system_dir.is_dir():
            return Absent("hugetlb-unsupported: no /sys/kernel/mm/hugepages")
        if self._pool_dirs is None:  # pools and nodes do not come and go between cycles
            node_root = self._sys / "devices" / "system" / "node"
            self._pool_dirs = _pool_dirs(system_dir, None) + [
                pool
                for node_dir in sorted(node_root.glob("node[0-9]*"), key=_node_id)
                for pool in _pool_dirs(node_dir / "hugepages", _node_id(node_dir))
            ]
        try:
            return [_pool(directory, size_b, node) for directory, size_b, node in self._pool_dirs]
        except (ValueError, CollectorError) as e:
            self._pool_dirs = None  # look again next cycle
            return Absent(f"error: {e}"[:300])

    def _choice(self, name: str) -> str | None:
        path = self._sys / "kernel" / "mm" / "transparent_hugepage" / name
        try:
            return parse_choice(read_text(path))
        except CollectorError:
            return None

    def _compaction(self) -> Compaction | Absent:
        path = self._proc / "vmstat"
        try:
            stats = parse_flat_counters(read_text(path))
        except (ValueError, CollectorError) as e:
            return Absent(f"error: {e}"[:300])
        counters: dict[str, int] = {k: stats[k] for k in COMPACTION_COUNTERS if k in stats}
        now = self._clock.monotonic()
        rates: dict[str, float] = {}
        if self._prev_counters is not None:
            then, before = self._prev_counters
            dt = now - then
            if dt > 0:
                rates = {
                    k: (v - before[k]) / dt
                    for k, v in counters.items()
                    if k in before and v >= before[k]
                }
        self._prev_counters = (now, counters)
        return Compaction(counters=counters, rates_per_s=rates)


def _per_node(
    buddy: list[BuddyZone], page: int, order_2m: int, order_1g: int
) -> list[NodeContiguity]:
    """Sum the zones pods allocate from, per NUMA node (all zones if a node has none)."""
    out = []
    for node in sorted({z.node for z in buddy}):
        zones = [z for z in buddy if z.node == node]
        chosen = [z for z in zones if z.zone in POD_ZONES] or zones
        counts = tuple(map(sum, zip(*(z.counts for z in chosen), strict=True)))
        out.append(
            NodeContiguity(
                node=node,
                free_b=free_pages(counts) * page,
                free_b_ge_2mib=pages_at_or_above(counts, order_2m) * page,
                free_b_ge_1gib=pages_at_or_above(counts, order_1g) * page,
                largest_block_b=max(largest_block_pages(z.counts) for z in chosen) * page,
                unusable_2mib_frac=unusable_index(counts, order_2m),
            )
        )
    return out


def _node_id(path: Path) -> int:
    return int(path.name[4:])


_PoolDir = tuple[str, int, int | None]
"""A hugepage pool directory (as a string: cheaper to join), its page size, its node."""


def _pool_dirs(directory: Path, node: int | None) -> list[_PoolDir]:
    if not directory.is_dir():
        return []
    found = []
    for pool_dir in directory.iterdir():
        match = _HUGEPAGE_DIR.fullmatch(pool_dir.name)
        if match is not None:
            found.append((str(pool_dir), int(match.group(1)) * 1024, node))
    return sorted(found, key=lambda pool: pool[1])


def _pool(directory: str, size_b: int, node: int | None) -> HugepagePool:
    def count(name: str) -> int:
        path = f"{directory}/{name}"
        text = read_text(path).strip()
        if not text.isdigit():
            raise ValueError(f"parse {path}: {text[:30]!r}")
        return int(text)

    return HugepagePool(
        size_b=size_b,
        node=node,
        total=count("nr_hugepages"),
        free=count("free_hugepages"),
        surplus=count("surplus_hugepages"),
        reserved=count("resv_hugepages") if node is None else None,
    )


def build(settings: AgentSettings, clock: Clock) -> MemfragCollector:
    return MemfragCollector(settings.paths.proc, settings.paths.sys, clock)
