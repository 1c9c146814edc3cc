"""Per-disk utilisation and await from ``/proc/diskstats``, as ``iostat -x`` computes them.

Kernel facts relied on (``Documentation/admin-guide/iostats.rst``): each line is ``major
minor name`` then at least 11 counters — reads completed, merged, sectors, ms reading;
writes completed, merged, sectors, ms writing; I/Os in flight; ms doing I/O
(``io_ticks``); weighted ms — then, from 4.18, four discard counters (completed, merged,
sectors, ms) and, from 5.5, two flush counters. Counters only grow, but wrap at 32 bits
on 32-bit kernels and restart when a device is removed and added again, so a delta that
goes back is no measurement.

* ``util_pct`` = Δio_ticks / interval: the share of the interval with I/O in flight.
* ``await_ms`` = Δ(read + write + discard ticks) / Δ(reads + writes + discards completed).

Only whole disks count, found in ``/sys/block`` (partitions are not there), less the
virtual ones that do no device I/O of their own (loop, ram, zram, nbd): a saturated disk is
what makes a node bad for I/O-heavy pods. The parser is pure and tested on recorded files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from common.schema import MAX_DISKS, DiskUsage

VIRTUAL: Final = ("loop", "ram", "zram", "nbd")
"""Name prefixes of block devices with no device of their own."""
_MAX_VALUE: Final = 2**64 - 1


@dataclass(frozen=True, slots=True)
class DiskCounters:
    """The counters of one line that utilisation and await need."""

    completed: int
    """Reads, writes and discards completed."""
    ticks_ms: int
    """Milliseconds spent on them (reads, writes and discards)."""
    io_ticks_ms: int
    """Milliseconds with I/O in flight."""


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    """Counters per device name; a line that is not ``major minor name`` and 11 or more
    non-negative integers is a ValueError naming it."""
    out: dict[str, DiskCounters] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 14 or not all(p.isdigit() for p in parts[:2] + parts[3:]):
            raise ValueError(f"unexpected line {line[:80]!r}")
        v = [int(p) for p in parts[3:]]
        if any(x > _MAX_VALUE for x in v):
            raise ValueError(f"counter beyond 64 bits in {line[:80]!r}")
        discards, discard_ms = (v[11], v[14]) if len(v) >= 15 else (0, 0)
        out[parts[2]] = DiskCounters(
            completed=v[0] + v[4] + discards,
            ticks_ms=v[3] + v[7] + discard_ms,
            io_ticks_ms=v[9],
        )
    return out


def whole_disks(sys_root: Path) -> set[str] | None:
    """Names under ``<sys>/block`` (whole disks only); None where sysfs has no such
    directory (then no line can be told a partition, and none is reported)."""
    try:
        return {p.name for p in (sys_root / "block").iterdir()}
    except OSError:
        return None


def disk_usage(
    before: Mapping[str, DiskCounters],
    now: Mapping[str, DiskCounters],
    interval_s: float,
    disks: set[str],
) -> list[DiskUsage]:
    """Each disk of ``disks`` present in both samples (and not virtual) over
    ``interval_s``; a disk whose counters went back is left out this once. Sorted by
    name, at most :data:`MAX_DISKS`."""
    out = []
    for name in sorted(disks & now.keys() & before.keys()):
        if name.startswith(VIRTUAL) or len(name) > 253:  # 253: the schema's longest name
            continue
        a, b = before[name], now[name]
        completed = b.completed - a.completed
        ticks = b.ticks_ms - a.ticks_ms
        busy = b.io_ticks_ms - a.io_ticks_ms
        if completed < 0 or ticks < 0 or busy < 0:
            continue
        out.append(
            DiskUsage(
                name=name,
                util_pct=min(100.0, 100.0 * busy / (1000.0 * interval_s)),
                await_ms=min(1e9, ticks / completed) if completed else 0.0,
                iops=min(1e15, completed / interval_s),
            )
        )
    return out[:MAX_DISKS]
