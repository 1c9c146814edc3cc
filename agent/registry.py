"""The registry of collectors: one explicit entry per signal, in report order.

A test checks these keys against the modules in this package and the report's sections,
so a collector cannot be added without registering it. Nothing here has import-time side
effects: heavy dependencies (pynvml, the Kubernetes client) load when a collector is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from agent.collectors import allocatable, gpus, memfrag, numa, pods, psi, usage
from agent.collectors.base import Collector
from agent.settings import AgentSettings
from common.clock import Clock
from common.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CollectorSpec:
    build: Callable[[AgentSettings, Clock], Collector]
    default_enabled: bool = True
    rates: bool = False
    """True when the collector derives rates from consecutive samples, so a one-shot run
    samples it twice to report them."""
    isolated: bool = False
    """True when the collector may block outside the kernel (NVML, the network): it gets
    its own worker thread so a hang cannot hold up the file readers."""


COLLECTORS: Final[Mapping[str, CollectorSpec]] = {
    psi.NAME: CollectorSpec(psi.build, rates=True),
    memfrag.NAME: CollectorSpec(memfrag.build, rates=True),
    allocatable.NAME: CollectorSpec(allocatable.build),
    numa.NAME: CollectorSpec(numa.build),
    gpus.NAME: CollectorSpec(gpus.build, isolated=True),
    usage.NAME: CollectorSpec(usage.build, rates=True),
    pods.NAME: CollectorSpec(pods.build, isolated=True),
}


def select(enabled: tuple[str, ...] = (), disabled: tuple[str, ...] = ()) -> list[str]:
    """Names to run: ``enabled`` (or every default one) minus ``disabled``, in registry order.

    An unknown name is a ConfigError naming it, never silently ignored.
    """
    for name in (*enabled, *disabled):
        if name not in COLLECTORS:
            raise ConfigError(f"unknown collector {name!r}; known: {', '.join(COLLECTORS)}")
    chosen = set(enabled) if enabled else {n for n, s in COLLECTORS.items() if s.default_enabled}
    return [n for n in COLLECTORS if n in chosen and n not in disabled]
