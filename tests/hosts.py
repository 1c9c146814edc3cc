"""Test helpers: recorded host trees and a clock tests move by hand."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.hostpaths import HostPaths

FIXTURES = Path(__file__).parent / "fixtures"
HOSTS = ("k8s-v2-node", "two-numa-hugepages", "no-psi-v1", "vm-v1-hybrid")
"""Recorded host trees: a cgroup v2 Kubernetes node (systemd driver, per-cgroup PSI, IRQ
PSI), a two-NUMA host with hugepages (cgroup v2, cgroupfs driver, static CPU manager), a
kernel without PSI on cgroup v1, and a real VM recorded with ``hack.fixtures.record``."""


@dataclass
class FakeClock:
    """A clock tests move by hand."""

    wall_s: float = 1_790_000_000.0
    mono_s: float = 1000.0

    def wall(self) -> float:
        return self.wall_s

    def monotonic(self) -> float:
        return self.mono_s

    def advance(self, seconds: float) -> None:
        self.wall_s += seconds
        self.mono_s += seconds


def host_paths(root: Path) -> HostPaths:
    """HostPaths of a fixture tree, with its kubelet config file."""
    config = root / "var" / "lib" / "kubelet" / "config.yaml"
    return HostPaths.under(root / "proc", root / "sys", kubelet_config=config)
