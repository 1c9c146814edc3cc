"""Each pod's own CPU use and CPU stall, read from its cgroup every cycle.

The colocation controller tells latency-sensitive (LS) stall from best-effort (BE) use per
pod: node-level PSI mixes the two, and a BE pod stalled behind its own low shares is no
reason to throttle anyone. So each pod reports, from its cgroup:

* ``cpu_m`` — CPU used over the last interval: the delta of ``cpuacct.usage`` (v1,
  nanoseconds) or ``cpu.stat usage_usec`` (v2) over the monotonic time between samples.
  The first sample of a pod has no delta, so None.
* ``cpu_some_avg10_pct`` — the kernel's ``some avg10`` of the pod's ``cpu.pressure``, from
  the cgroup2 tree (the root on v2, ``unified/`` on hybrid hosts); None on pure v1, where
  upstream kernels keep no per-cgroup PSI.
* ``cpu_some_rate_pct`` — the stall share from the ``total`` delta since the last sample
  (avg10 lags by seconds; the delta does not), clamped to 100 % for read jitter.

A pod whose cgroup does not exist (pending, or already gone) gets no usage at all, and a
counter that went backwards (the cgroup was recreated) starts a new baseline instead of
reporting a negative figure. Only pods present this cycle are remembered, so the memory
held is bounded by the node's pods.

Measured usage changes every cycle while the pods themselves seldom do, so it goes in its
own report field (:attr:`~common.schema.NodeReport.pod_usage`, by pod UID), sent with every
report: the coordinator needs fresh per-pod stall each cycle to decide throttles, and the
pods section stays equal to the last one delivered and goes as ``unchanged``
(:mod:`agent.reportdelta`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent import cgroups
from agent.kernelfiles import CollectorError, parse_pressure, read_optional
from common.clock import Clock
from common.schema import PodInfo, PodUsage

_V1_CPUACCT_DIRS: Final = ("cpuacct", "cpu,cpuacct", "cpuacct,cpu")
"""Where v1 keeps ``cpuacct.usage``: its own mount, or one shared with ``cpu``."""


@dataclass(frozen=True, slots=True)
class _Sample:
    at: float
    cpu_us: int | None
    stall_us: int | None


class PodUsageSampler:
    """Remembers each pod's counters from the last cycle to turn them into rates."""

    def __init__(self, cgroup_root: Path, clock: Clock) -> None:
        self._layout = cgroups.LayoutWatch(cgroup_root, clock)
        self._clock = clock
        self._prev: dict[str, _Sample] = {}

    def sample(self, pods: list[PodInfo]) -> dict[str, PodUsage] | None:
        """The use of each of ``pods`` whose cgroup could be read, by UID; None when this
        host has no kubepods cgroup tree to read."""
        layout = self._layout.get()
        if layout is None:
            self._prev = {}
            return None
        now = self._clock.monotonic()
        current: dict[str, _Sample] = {}
        out: dict[str, PodUsage] = {}
        for pod in pods:
            cpu_us = _cpu_usage_us(layout, pod)
            pressure = _cpu_pressure(layout, pod)
            if cpu_us is None and pressure is None:
                continue
            avg10, stall_us = pressure if pressure is not None else (None, None)
            sample = _Sample(now, cpu_us, stall_us)
            current[pod.uid] = sample
            prev = self._prev.get(pod.uid)
            cpu_m = rate_pct = None
            if prev is not None and now > prev.at:
                dt_us = (now - prev.at) * 1e6
                if cpu_us is not None and prev.cpu_us is not None and cpu_us >= prev.cpu_us:
                    cpu_m = round((cpu_us - prev.cpu_us) * 1000 / dt_us)
                if stall_us is not None and prev.stall_us is not None and stall_us >= prev.stall_us:
                    rate_pct = min(100.0, 100.0 * (stall_us - prev.stall_us) / dt_us)
            out[pod.uid] = PodUsage(
                cpu_m=cpu_m, cpu_some_avg10_pct=avg10, cpu_some_rate_pct=rate_pct
            )
        self._prev = current
        return out


def _cpu_usage_us(layout: cgroups.CgroupLayout, pod: PodInfo) -> int | None:
    """The pod cgroup's CPU time so far in µs, or None where it cannot be read."""
    relative = cgroups.pod_relative(layout.driver, pod.qos_class, pod.uid)
    if relative is None:
        return None
    if layout.version == 2:
        text = _read(layout.root / relative / "cpu.stat")
        if text is None:
            return None
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec" and value.strip().isdigit():
                return int(value)
        return None
    for name in _V1_CPUACCT_DIRS:
        text = _read(layout.root / name / relative / "cpuacct.usage")
        if text is not None:
            return int(text) // 1000 if text.strip().isdigit() else None
    return None


def _cpu_pressure(layout: cgroups.CgroupLayout, pod: PodInfo) -> tuple[float, int] | None:
    """``(some avg10, some total µs)`` of the pod's ``cpu.pressure``, or None."""
    directory = layout.pod_psi_dir(pod.qos_class, pod.uid)
    if directory is None:
        return None
    text = _read(directory / "cpu.pressure")
    if text is None:
        return None
    try:
        some = parse_pressure(text).get("some")
    except ValueError:
        return None
    return None if some is None else (some[0], some[3])


def _read(path: Path) -> str | None:
    """The file's text, or None when it is missing or unreadable (the pod left meanwhile)."""
    try:
        return read_optional(path)
    except CollectorError:
        return None
