"""Finding the kubepods cgroups and reading their files, on cgroup v1, v2 and hybrid hosts.

Kubelet puts pods under one tree whose name depends on the cgroup driver:

=========  ==================================  =============================
driver     pods root                           QoS children
=========  ==================================  =============================
systemd    ``kubepods.slice``                  ``kubepods-burstable.slice``,
                                               ``kubepods-besteffort.slice``
cgroupfs   ``kubepods``                        ``burstable``, ``besteffort``
=========  ==================================  =============================

On v2 that tree sits under the unified mount; on v1 it repeats under each controller
(``memory/``, ``cpu,cpuacct/`` …). A *hybrid* host (v1 controllers plus an empty cgroup2
at ``unified/``) still has per-cgroup PSI files in the unified tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent.kernelfiles import CollectorError, read_optional, read_text
from common.clock import Clock

QOS_CLASSES: Final = ("burstable", "besteffort")
_V1_CPU_DIRS: Final = ("cpu,cpuacct", "cpu", "cpuacct,cpu")
# v1 reports "no limit" as LONG_MAX rounded down to the page size.
_V1_UNLIMITED: Final = 2**62
_V2_INACTIVE: Final = re.compile(r"^inactive_file (\d+)$", re.M)
_V1_INACTIVE: Final = re.compile(r"^total_inactive_file (\d+)$", re.M)
_POD_UID: Final = re.compile(r"[0-9a-fA-F][0-9a-fA-F-]{0,63}")
"""What a pod UID may hold before it becomes part of a path: hex digits and dashes
(Kubernetes UIDs are RFC 4122 strings), so no ``/``, ``.`` or ``_``."""


@dataclass(frozen=True, slots=True)
class CgroupLayout:
    """Where the pods tree of this host lives."""

    version: int
    """1 (v1 or hybrid) or 2 (unified)."""
    driver: str
    """``systemd`` or ``cgroupfs``."""
    root: Path
    """The cgroup mount root (``/sys/fs/cgroup``)."""
    unified: Path | None
    """The cgroup2 mount: the root on v2, ``unified/`` on hybrid hosts, None on pure v1."""

    def pods_dir(self, qos: str | None = None, controller: str = "memory") -> Path:
        """The kubepods directory (``qos`` None) or one QoS child, for a v1 controller."""
        base = self.root if self.version == 2 else self._v1_controller_dir(controller)
        return base / _relative(self.driver, qos)

    def psi_dir(self, qos: str | None = None) -> Path | None:
        """The directory holding ``*.pressure`` files for this level, if the host has one."""
        if self.unified is None:
            return None
        path = self.unified / _relative(self.driver, qos)
        return path if (path / "cpu.pressure").exists() else None

    def pod_dir(self, qos_class: str, uid: str, controller: str = "cpu") -> Path | None:
        """A pod's cgroup directory for a v1 controller (or on v2); None for a malformed UID.

        The UID is checked before it becomes a path: it comes from the API server or the
        kubelet, and a value holding ``/`` or ``..`` must never name a directory outside the
        pods tree.
        """
        relative = pod_relative(self.driver, qos_class, uid)
        if relative is None:
            return None
        base = self.root if self.version == 2 else self._v1_controller_dir(controller)
        return base / relative

    def pod_psi_dir(self, qos_class: str, uid: str) -> Path | None:
        """A pod's cgroup in the cgroup2 tree (where its ``*.pressure`` files are), if any."""
        relative = pod_relative(self.driver, qos_class, uid)
        if self.unified is None or relative is None:
            return None
        return self.unified / relative

    def _v1_controller_dir(self, controller: str) -> Path:
        if controller != "cpu":
            return self.root / controller
        for name in _V1_CPU_DIRS:
            if (self.root / name).is_dir():
                return self.root / name
        return self.root / "cpu"


def _relative(driver: str, qos: str | None) -> Path:
    if driver == "systemd":
        base = Path("kubepods.slice")
        return base if qos is None else base / f"kubepods-{qos}.slice"
    base = Path("kubepods")
    return base if qos is None else base / qos


def pod_relative(driver: str, qos_class: str, uid: str) -> Path | None:
    """A pod's cgroup below the cgroup root, as kubelet names it; None for a malformed UID.

    Guaranteed pods sit directly under kubepods, the others under their QoS child; the
    systemd driver spells the UID with ``_`` for ``-`` (``-`` separates slice levels).
    """
    if not _POD_UID.fullmatch(uid):
        return None
    qos = {"Burstable": "burstable", "BestEffort": "besteffort"}.get(qos_class)
    parent = _relative(driver, qos)
    if driver == "systemd":
        prefix = "kubepods" if qos is None else f"kubepods-{qos}"
        return parent / f"{prefix}-pod{uid.replace('-', '_')}.slice"
    return parent / f"pod{uid}"


def detect(root: Path) -> CgroupLayout | None:
    """The layout of the pods tree under ``root``, or None when no kubepods tree exists."""
    unified: Path | None
    if (root / "cgroup.controllers").exists():
        version, unified, search = 2, root, [root]
    else:
        unified = root / "unified" if (root / "unified" / "cgroup.procs").exists() else None
        version = 1
        search = [root / "memory", *(root / d for d in _V1_CPU_DIRS)]
        if unified is not None:
            search.append(unified)
    for base in search:
        if (base / "kubepods.slice").is_dir():
            return CgroupLayout(version, "systemd", root, unified)
        if (base / "kubepods").is_dir():
            return CgroupLayout(version, "cgroupfs", root, unified)
    return None


class LayoutWatch:
    """The pods tree layout, detected again at most every ``every_s`` seconds.

    Detection stats a dozen paths; the tree appears once when kubelet starts and then
    stays, so collectors ask this instead of detecting every cycle. A collector that
    finds a file gone calls :meth:`invalidate`.
    """

    def __init__(self, root: Path, clock: Clock, every_s: float = 60.0) -> None:
        self._root = root
        self._clock = clock
        self._every_s = every_s
        self._cached: tuple[float, CgroupLayout | None] | None = None

    def get(self) -> CgroupLayout | None:
        now = self._clock.monotonic()
        if self._cached is None or now - self._cached[0] >= self._every_s:
            self._cached = (now, detect(self._root))
        return self._cached[1]

    def invalidate(self) -> None:
        self._cached = None


def read_int(path: Path) -> int:
    text = read_text(path).strip()
    try:
        return int(text)
    except ValueError as e:
        raise CollectorError(f"parse {path}: expected an integer, got {text[:40]!r}") from e


def memory_limit_b(directory: Path, version: int) -> int | None:
    """The memory limit of a cgroup in bytes; None when unlimited."""
    if version == 2:
        text = read_text(directory / "memory.max").strip()
        if text == "max":
            return None
        try:
            return int(text)
        except ValueError as e:
            raise CollectorError(f"parse {directory / 'memory.max'}: {text[:40]!r}") from e
    value = read_int(directory / "memory.limit_in_bytes")
    return None if value >= _V1_UNLIMITED else value


def memory_usage(directory: Path, version: int) -> tuple[int, int]:
    """``(current, working_set)`` bytes; working set = usage − inactive file (cAdvisor).

    Only ``inactive_file`` is needed from ``memory.stat`` (50-odd lines on v2), so it is
    searched for rather than the whole file parsed. v1 reports the hierarchical
    ``total_inactive_file``.
    """
    if version == 2:
        current = read_int(directory / "memory.current")
        pattern = _V2_INACTIVE
    else:
        current = read_int(directory / "memory.usage_in_bytes")
        pattern = _V1_INACTIVE
    stat_path = directory / "memory.stat"
    match = pattern.search(read_text(stat_path))
    if match is None:
        raise CollectorError(f"parse {stat_path}: no inactive_file line")
    return current, max(0, current - int(match.group(1)))


def cpu_quota_m(directory: Path, version: int) -> int | None:
    """The CFS quota as millicores; None when unlimited."""
    if version == 2:
        text = read_text(directory / "cpu.max").split()
        if not text or text[0] == "max":
            return None
        try:
            quota, period = int(text[0]), int(text[1]) if len(text) > 1 else 100_000
        except ValueError as e:
            raise CollectorError(f"parse {directory / 'cpu.max'}: {' '.join(text)[:40]!r}") from e
    else:
        quota = read_int(directory / "cpu.cfs_quota_us")
        if quota < 0:
            return None
        period = read_int(directory / "cpu.cfs_period_us")
    if period <= 0:
        raise CollectorError(f"{directory}: CFS period {period} is not positive")
    return quota * 1000 // period


def cpu_weight(directory: Path, version: int) -> int | None:
    """``cpu.weight`` on v2, ``cpu.shares`` on v1 (as written: the units differ)."""
    path = directory / ("cpu.weight" if version == 2 else "cpu.shares")
    text = read_optional(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError as e:
        raise CollectorError(f"parse {path}: expected an integer, got {text[:40]!r}") from e
