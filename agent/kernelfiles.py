"""Parsers for the small kernel file formats several collectors share.

Pure functions over text, tested on recorded files: ``/proc/meminfo`` (and the per-node
``meminfo`` in sysfs), CPU lists (``0-3,8-11``), ``/proc/vmstat`` and the bracketed
choice files of sysfs (``always [madvise] never``).
"""

from __future__ import annotations

import re
from typing import Final

# "MemTotal:  3762380 kB", "Node 0 MemFree: 1 kB", "HugePages_Total:  0" (a count).
_MEMINFO_LINE: Final = re.compile(
    r"^[ \t]*(?:Node[ \t]+\d+[ \t]+)?([^:\s]+):[ \t]*(\d+)( kB)?[ \t]*$", re.M
)


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` or ``nodeN/meminfo`` → bytes per key (``HugePages_*`` stay counts).

    Raises ValueError when any non-empty line is not ``Key: value [kB]``. One regular
    expression pass instead of a Python loop per line: this file is read several times a
    cycle.
    """
    text = text.strip()
    matches = _MEMINFO_LINE.findall(text)
    if len(matches) != (text.count("\n") + 1 if text else 0):
        bad = next(line for line in text.splitlines() if not _MEMINFO_LINE.match(line))
        raise ValueError(f"unexpected meminfo line {bad[:60]!r}")
    return {key: int(value) * (1024 if kb else 1) for key, value, kb in matches}


def parse_cpulist(text: str) -> list[int]:
    """``0-3,8,10-11`` → sorted CPU ids; an empty list for an empty file.

    Raises ValueError on anything else (the kernel's ``%*pbl`` format has no spaces).
    """
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return []
    for part in text.split(","):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad cpu list element {part[:20]!r}")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first or last > 1 << 20:
            raise ValueError(f"bad cpu range {part[:20]!r}")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def parse_flat_counters(text: str) -> dict[str, int]:
    """``/proc/vmstat``-style ``name value`` lines; lines that don't fit are an error."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise ValueError(f"unexpected line {line[:60]!r}")
        out[parts[0]] = int(parts[1])
    return out


def parse_choice(text: str) -> str | None:
    """The bracketed choice of a sysfs mode file: ``always [madvise] never`` → ``madvise``."""
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else None
