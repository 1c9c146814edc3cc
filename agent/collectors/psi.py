"""Pressure stall information: how much work is waiting on CPU, memory, I/O and IRQs.

Reads ``/proc/pressure/{cpu,memory,io,irq}`` and, where the host has a cgroup2 tree, the
same files of the kubepods, burstable and besteffort cgroups. Besides the kernel's
``avg10/60/300`` it reports ``rate_pct``, the stall share over the last collection
interval computed from the ``total`` counter (µs): avg10 lags and smooths over ~10 s,
the delta does not.

Kernel facts this relies on (``kernel/sched/psi.c``): the system ``cpu full`` line is
printed as zeros since 5.18 because it is undefined at system level, so it is reported as
None; ``irq`` exists only with ``CONFIG_IRQ_TIME_ACCOUNTING`` and has only a ``full``
line; without PSI (``psi=0`` or ``CONFIG_PSI`` off) ``/proc/pressure`` does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agent import cgroups
from agent.collectors.base import NoData
from agent.kernelfiles import CollectorError, RawLine, parse_pressure, read_optional
from agent.settings import AgentSettings
from common.clock import Clock
from common.schema import Absent, PsiGroup, PsiLine, PsiResource, PsiSection, is_absent

NAME: Final = "psi"
RESOURCES: Final = ("cpu", "memory", "io", "irq")
_KINDS: Final = ("some", "full")


@dataclass
class _Previous:
    """Totals from the last cycle, keyed by (scope path, resource, kind)."""

    at: float | None = None
    totals: dict[tuple[str, str, str], int] = field(default_factory=dict)


class PsiCollector:
    """System and per-QoS-cgroup pressure, with rates from consecutive samples."""

    name = NAME

    def __init__(self, proc: Path, cgroup_root: Path, clock: Clock) -> None:
        self._pressure_dir = proc / "pressure"
        self._layout = cgroups.LayoutWatch(cgroup_root, clock)
        self._clock = clock
        self._prev = _Previous()

    def collect(self) -> PsiSection:
        if not self._pressure_dir.is_dir():
            raise NoData("psi-unsupported: kernel has no /proc/pressure (CONFIG_PSI off or psi=0)")
        now = self._clock.monotonic()
        interval = None if self._prev.at is None else now - self._prev.at
        totals: dict[tuple[str, str, str], int] = {}
        system = self._group("system", self._pressure_dir, "{}", interval, totals, system=True)
        if is_absent(system.cpu) and is_absent(system.memory):
            raise CollectorError(f"{self._pressure_dir}: no readable pressure file")
        cgroups_part = self._cgroups(interval, totals)
        self._prev = _Previous(at=now, totals=totals)
        return PsiSection(
            measured_at=self._clock.wall(),
            interval_s=interval,
            system=system,
            cgroups=cgroups_part,
        )

    def _cgroups(
        self, interval: float | None, totals: dict[tuple[str, str, str], int]
    ) -> dict[str, PsiGroup | Absent] | Absent:
        layout = self._layout.get()
        if layout is None:
            return Absent("no-kubepods-cgroup: not a Kubernetes node, or cgroup root not mounted")
        if layout.unified is None:
            return Absent("cgroup-v1: upstream kernels have no per-cgroup PSI on cgroup v1")
        out: dict[str, PsiGroup | Absent] = {}
        for scope, qos in (("kubepods", None), *((q, q) for q in cgroups.QOS_CLASSES)):
            directory = layout.psi_dir(qos)
            if directory is None:
                self._layout.invalidate()
                out[scope] = Absent(f"no-pressure-files: no {scope} cgroup under {layout.unified}")
                continue
            out[scope] = self._group(scope, directory, "{}.pressure", interval, totals)
        return out

    def _group(
        self,
        scope: str,
        directory: Path,
        pattern: str,
        interval: float | None,
        totals: dict[tuple[str, str, str], int],
        *,
        system: bool = False,
    ) -> PsiGroup:
        resources: dict[str, PsiResource | Absent] = {}
        base = str(directory)
        for resource in RESOURCES:
            path = f"{base}/{pattern.format(resource)}"
            try:
                text = read_optional(path)
                raw = None if text is None else parse_pressure(text)
            except (ValueError, CollectorError) as e:
                resources[resource] = Absent(f"error: {path}: {e}"[:300])
                continue
            if raw is None:
                resources[resource] = Absent(
                    "irq-unsupported: kernel built without CONFIG_IRQ_TIME_ACCOUNTING"
                    if resource == "irq"
                    else f"missing: {path}"
                )
                continue
            lines: dict[str, PsiLine | None] = {}
            for kind in _KINDS:
                undefined = system and resource == "cpu" and kind == "full"
                if kind not in raw or undefined:
                    lines[kind] = None
                    continue
                key = (scope, resource, kind)
                totals[key] = raw[kind][3]
                lines[kind] = _line(raw[kind], self._prev.totals.get(key), interval)
            resources[resource] = PsiResource(some=lines["some"], full=lines["full"])
        return PsiGroup(
            path=str(directory),
            cpu=resources["cpu"],
            memory=resources["memory"],
            io=resources["io"],
            irq=resources["irq"],
        )


def _line(raw: RawLine, prev_total: int | None, interval: float | None) -> PsiLine:
    rate = None
    if prev_total is not None and interval and interval > 0 and raw[3] >= prev_total:
        # A delta slightly above the interval is read jitter: clamp to 100 %.
        rate = min(100.0, 100.0 * (raw[3] - prev_total) / (interval * 1e6))
    return PsiLine(
        avg10_pct=raw[0], avg60_pct=raw[1], avg300_pct=raw[2], total_us=raw[3], rate_pct=rate
    )


def build(settings: AgentSettings, clock: Clock) -> PsiCollector:
    return PsiCollector(settings.paths.proc, settings.paths.cgroup, clock)
