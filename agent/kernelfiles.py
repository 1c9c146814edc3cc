"""Reading kernel files, and parsers for the small formats several parts share.

The bottom of the agent (``.importlinter``: collectors, cgroups and the enforcer's
pressure watch all read through here, and this module imports none of them). Reading
(:func:`read_text`, :func:`read_optional`) is bounded and refuses what is not a regular
file; the parsers are pure functions over text, tested on recorded files:
``/proc/meminfo`` (and the per-node ``meminfo`` in sysfs), CPU lists (``0-3,8-11``),
``/proc/vmstat``, pressure (PSI) files and the bracketed choice files of sysfs
(``always [madvise] never``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from common.files import read_regular

MAX_KERNEL_FILE_B = 8 * 2**20
"""Most bytes read from one kernel file. The largest real ones (``/proc/zoneinfo`` with
per-CPU page sets, ``/proc/stat``) stay under 1 MiB on machines with a thousand CPUs;
anything bigger is not the file the collector expects."""


class CollectorError(Exception):
    """A real failure while reading or parsing a kernel file or a signal: a collector's
    section becomes ``Absent("error: …")`` (:mod:`agent.collectors.base`)."""


def read_text(path: Path | str) -> str:
    """Read a kernel file; any failure becomes CollectorError naming the path.

    A missing file is a real failure here; collectors that treat absence as "not on
    this node" check for it first and raise ``NoData``. Read through
    :func:`common.files.read_regular`: a FIFO, a device or an endless file in place of a
    kernel file fails at once (``--proc-root`` may point anywhere, and a host path may
    be tampered with) instead of blocking the collector thread or exhausting memory.
    Plain ``os.read`` costs a third of ``Path.read_text`` (no buffered text layer), and
    an agent reads dozens of these files every cycle.
    """
    try:
        return read_regular(path, MAX_KERNEL_FILE_B).decode()
    except (OSError, UnicodeDecodeError) as e:
        raise CollectorError(f"read {path}: {getattr(e, 'strerror', None) or e}") from e


def read_optional(path: Path | str) -> str | None:
    """Like :func:`read_text`, but None when the file does not exist (one syscall fewer
    than checking first)."""
    try:
        return read_text(path)
    except CollectorError as e:
        if isinstance(e.__cause__, FileNotFoundError):
            return None
        raise


_PRESSURE_LINE: Final = re.compile(
    r"^(some|full) avg10=(\d+\.\d+) avg60=(\d+\.\d+) avg300=(\d+\.\d+) total=(\d+)$", re.M
)

# One raw line as read: (avg10, avg60, avg300, total_us).
RawLine = tuple[float, float, float, int]


def parse_pressure(text: str) -> dict[str, RawLine]:
    """Parse one pressure file into ``{"some": ..., "full": ...}``.

    Raises ValueError on anything that is not the kernel's exact format
    (``some avg10=0.00 avg60=0.00 avg300=0.00 total=0``), line for line.
    """
    text = text.strip()
    matches = _PRESSURE_LINE.findall(text)
    if not matches or len(matches) != text.count("\n") + 1:
        raise ValueError(f"not a pressure file: {text[:60]!r}")
    out: dict[str, RawLine] = {}
    for kind, avg10, avg60, avg300, total in matches:
        avgs = (float(avg10), float(avg60), float(avg300))
        if kind in out or not all(a <= 100.0 for a in avgs):
            raise ValueError(f"duplicate line or value out of range for {kind!r}")
        out[kind] = (avgs[0], avgs[1], avgs[2], int(total))
    return out


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
