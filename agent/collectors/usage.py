"""What the node really uses: CPU over the last interval and memory right now.

CPU comes from ``/proc/stat`` deltas (jiffies), so the first cycle has no CPU figure
(``Absent("first-sample")``). Memory separates the working set (what kubelet evicts on:
used − inactive file cache) from the page cache, which the kernel can drop; reporting
only "used" would make every node with a warm cache look full. Disks come from
``/proc/diskstats`` deltas (:mod:`agent.diskstats`); a disk file that cannot be read or
parsed costs only ``disks`` (absent with the reason), never the CPU and memory figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from agent import diskstats
from agent.kernelfiles import CollectorError, parse_meminfo, read_optional, read_text
from agent.settings import AgentSettings
from common.clock import Clock
from common.schema import Absent, CpuUsage, DiskUsage, MemoryUsage, UsageSection

NAME: Final = "usage"

# Columns of the aggregate "cpu" line of /proc/stat (proc(5)); guest time is already
# included in user/nice, so it is not added again.
_FIELDS: Final = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_stat_cpu(text: str) -> tuple[dict[str, int], int]:
    """The aggregate ``cpu`` line as jiffies per field, and the number of ``cpuN`` lines."""
    total: dict[str, int] | None = None
    ncpu = 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = line.split()[1:]
            if len(values) < 4 or not all(v.isdigit() for v in values):
                raise ValueError(f"unexpected cpu line {line[:60]!r}")
            padded = [int(v) for v in values] + [0] * max(0, len(_FIELDS) - len(values))
            total = dict(zip(_FIELDS, padded, strict=False))
        elif line.startswith("cpu") and line[3:4].isdigit():
            ncpu += 1
    if total is None or ncpu == 0:
        raise ValueError("no aggregate cpu line or no per-cpu lines")
    return total, ncpu


def memory_usage(mem: dict[str, int]) -> MemoryUsage:
    """Node memory use from parsed ``/proc/meminfo``; raises KeyError if a core key is missing."""
    total, free = mem["MemTotal"], mem["MemFree"]
    active_file, inactive_file = mem["Active(file)"], mem["Inactive(file)"]
    used = max(0, total - free)
    return MemoryUsage(
        total_b=total,
        used_b=used,
        working_set_b=max(0, used - inactive_file),
        page_cache_b=active_file + inactive_file,
        inactive_file_b=inactive_file,
        # MemAvailable exists since 3.14; older kernels get the same rough estimate.
        available_b=min(total, mem.get("MemAvailable", free + inactive_file)),
        shmem_b=mem.get("Shmem", 0),
        unevictable_b=mem.get("Unevictable", 0),
        swap_used_b=max(0, mem.get("SwapTotal", 0) - mem.get("SwapFree", 0)),
    )


def read_memory(proc: Path) -> MemoryUsage:
    """Node memory use from ``<proc>/meminfo``; a broken file is a CollectorError."""
    path = proc / "meminfo"
    try:
        return memory_usage(parse_meminfo(read_text(path)))
    except ValueError as e:
        raise CollectorError(f"parse {path}: {e}") from e
    except KeyError as e:
        raise CollectorError(f"{path}: no {e.args[0]}") from e


class UsageCollector:
    name = NAME

    def __init__(self, proc: Path, clock: Clock, sys_root: Path | None = None) -> None:
        self._proc = proc
        self._sys = sys_root
        self._clock = clock
        self._prev: tuple[float, dict[str, int]] | None = None
        self._disks_prev: tuple[float, dict[str, diskstats.DiskCounters]] | None = None

    def collect(self) -> UsageSection:
        stat_path = self._proc / "stat"
        try:
            jiffies, ncpu = parse_stat_cpu(read_text(stat_path))
        except ValueError as e:
            raise CollectorError(f"parse {stat_path}: {e}") from e
        memory = read_memory(self._proc)
        now = self._clock.monotonic()
        cpu = self._cpu(now, jiffies, ncpu)
        self._prev = (now, jiffies)
        return UsageSection(
            measured_at=self._clock.wall(), cpu=cpu, memory=memory, disks=self._disks(now)
        )

    def _disks(self, now: float) -> list[DiskUsage] | Absent:
        path = self._proc / "diskstats"
        try:
            text = read_optional(path)
            if text is None:
                return Absent("no-diskstats: the kernel has no /proc/diskstats")
            counters = diskstats.parse_diskstats(text)
        except CollectorError as e:
            self._disks_prev = None
            return Absent(f"error: {e}")
        except ValueError as e:
            self._disks_prev = None
            return Absent(f"error: parse {path}: {e}")
        before, self._disks_prev = self._disks_prev, (now, counters)
        if before is None or now <= before[0]:
            return Absent("first-sample: disk use needs two samples")
        disks = None if self._sys is None else diskstats.whole_disks(self._sys)
        if disks is None:
            return Absent("no-sysfs: whole disks are told from partitions by /sys/block")
        return diskstats.disk_usage(before[1], counters, now - before[0], disks)

    def _cpu(self, now: float, jiffies: dict[str, int], ncpu: int) -> CpuUsage | Absent:
        if self._prev is None:
            return Absent("first-sample: CPU use needs two samples")
        then, before = self._prev
        delta = {k: jiffies[k] - before[k] for k in _FIELDS}
        elapsed = sum(delta.values())
        if elapsed <= 0 or any(v < 0 for v in delta.values()):
            return Absent("no-progress: /proc/stat did not advance (or went back)")
        busy = elapsed - delta["idle"] - delta["iowait"]
        share = busy / elapsed
        return CpuUsage(
            window_s=now - then,
            used_m=round(share * ncpu * 1000),
            used_pct=100.0 * share,
            iowait_pct=100.0 * delta["iowait"] / elapsed,
            steal_pct=100.0 * delta["steal"] / elapsed,
        )


def build(settings: AgentSettings, clock: Clock) -> UsageCollector:
    return UsageCollector(settings.paths.proc, clock, settings.paths.sys)
