"""The coordinator's settings: every knob, its unit and why its default is what it is.

Loaded from YAML (``stowage coordinator --config FILE``) by :mod:`common.config`, which
refuses unknown keys and wrong types, naming the key. Example::

    policy: {name: stowage, args: {stranding_weight: 0.3}}
    signals: {contiguity_threshold_b: 536870912, cpu_utilization_threshold_pct: 95}
    publisher: {heartbeat_s: 300}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common.errors import ConfigError

MIB = 2**20


def _positive(where: str, **values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ConfigError(f"{where}.{name}: must be positive, got {value}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySettings:
    name: str = "stowage"
    """Scoring policy (see ``coordinator/scoring/registry.py``): stowage, volcano-binpack,
    most-allocated, fgd, …"""
    args: dict[str, Any] = field(default_factory=dict)
    """Policy arguments, checked strictly by the registry."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalSettings:
    """What live measurements may do, and how long they stay true."""

    report_ttl_s: float = 60.0
    """A node whose last report is older is *unknown*: neutral, never acted on. Six agent
    intervals, so one lost report or a slow restart does not blank a node."""
    contiguity_threshold_b: int = 512 * MIB
    """``memoryFragmentationThreshold``: a pod needing contiguous memory is filtered out of
    nodes with less free memory than this (or than it needs) in ≥ 2 MiB blocks."""
    cpu_utilization_threshold_pct: float = 95.0
    """``cpuUtilizationThreshold``: batch pods skip nodes whose real CPU use or CPU
    pressure is above this."""
    numa_alignment: bool = True
    """Pods kubelet will align to one NUMA node pass only nodes with a NUMA node able to
    hold them (kubelet would otherwise reject them after binding)."""
    gpu_topology: bool = True
    """Multi-GPU pods prefer nodes where their GPUs share NVLink."""
    true_allocatable: bool = True
    """Judge fullness against what the agent measured pods can really use."""

    def __post_init__(self) -> None:
        _positive("signals", report_ttl_s=self.report_ttl_s)
        if self.contiguity_threshold_b < 0:
            raise ConfigError("signals.contiguity_threshold_b: must not be negative")
        if not 0 < self.cpu_utilization_threshold_pct <= 100:
            raise ConfigError("signals.cpu_utilization_threshold_pct: expected 0 < value <= 100")


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestSettings:
    max_body_b: int = 1 * MIB
    """Largest report accepted (413 above); a 110-pod 8-GPU node sends about 60 KiB."""
    auth: str = "tokenreview"
    """``tokenreview`` (the agent's projected token, verified by the API server),
    ``static`` (``static_tokens`` below, for tests and the standalone mode) or ``none``."""
    audience: str = "stowage-coordinator"
    """Audience the agents' projected tokens are issued for."""
    token_cache_ttl_s: float = 60.0
    """How long a reviewed token is trusted before asking the API server again."""
    static_tokens: dict[str, str] = field(default_factory=dict)
    """token → node name, for ``auth: static``."""
    directive_ttl_s: float = 60.0
    """Lifetime of the directives sent back; agents fall back to defaults after it."""

    def __post_init__(self) -> None:
        if self.auth not in ("tokenreview", "static", "none"):
            raise ConfigError("ingest.auth: expected tokenreview, static or none")
        _positive(
            "ingest",
            max_body_b=self.max_body_b,
            token_cache_ttl_s=self.token_cache_ttl_s,
            directive_ttl_s=self.directive_ttl_s,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeSettings:
    kubeconfig: str | None = None
    """Kubeconfig file; None = in-cluster service account (or the standalone emulator)."""
    namespace: str = "stowage-system"
    """Where the Lease lives and Events are written."""
    resync_s: float = 300.0
    """Relist everything this often, on top of watching: a missed event heals within it."""
    assumed_ttl_s: float = 30.0
    """A pod the extender placed counts on its node for this long, or until the pod watch
    shows where it was bound: bursts do not pile onto one node between two watch events."""

    def __post_init__(self) -> None:
        _positive("kube", resync_s=self.resync_s, assumed_ttl_s=self.assumed_ttl_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherSettings:
    enabled: bool = True
    heartbeat_s: float = 300.0
    """Re-write a node's annotations at least this often, so readers can tell "unchanged"
    from "publisher dead"."""
    change_pct: float = 5.0
    """A published percentage is re-written when it moves by more than this many points."""
    max_patches_per_s: float = 20.0
    """Cluster-wide cap on Node patches (API server load at 2,000 nodes)."""

    def __post_init__(self) -> None:
        _positive(
            "publisher", heartbeat_s=self.heartbeat_s, max_patches_per_s=self.max_patches_per_s
        )
        if not 0 <= self.change_pct <= 100:
            raise ConfigError("publisher.change_pct: expected 0..100")


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderSettings:
    lease_name: str = "stowage-coordinator"
    lease_duration_s: float = 15.0
    """Leader election timings as kube-scheduler's defaults (15 s / 10 s / 2 s)."""
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        _positive(
            "leader",
            lease_duration_s=self.lease_duration_s,
            renew_deadline_s=self.renew_deadline_s,
            retry_period_s=self.retry_period_s,
        )
        if self.lease_duration_s < 1:
            raise ConfigError("leader.lease_duration_s: at least 1 (a Lease counts whole seconds)")
        if not self.lease_duration_s > self.renew_deadline_s > self.retry_period_s * 1.2:
            raise ConfigError(
                "leader: need lease_duration_s > renew_deadline_s > 1.2 × retry_period_s"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorSettings:
    listen: str = "0.0.0.0:8080"
    policy: PolicySettings = field(default_factory=PolicySettings)
    signals: SignalSettings = field(default_factory=SignalSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    kube: KubeSettings = field(default_factory=KubeSettings)
    publisher: PublisherSettings = field(default_factory=PublisherSettings)
    leader: LeaderSettings = field(default_factory=LeaderSettings)

    def __post_init__(self) -> None:
        host, _, port = self.listen.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"listen: {self.listen!r} is not HOST:PORT")
