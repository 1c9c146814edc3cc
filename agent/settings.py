"""Everything the agent can be told, with the reason for each default.

Built from the command line by :mod:`agent.main`; collectors and the reporter receive the
one frozen :class:`AgentSettings` instead of reading flags or the environment themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.hostpaths import HostPaths
from common.errors import ConfigError

DEFAULT_LABEL_KEYS: tuple[str, ...] = (
    # Queue membership: Volcano writes the queue as a pod annotation and some setups as a label.
    "volcano.sh/queue-name",
    "scheduling.volcano.sh/queue-name",
    "kueue.x-k8s.io/queue-name",
    # QoS opt-ins that colocation and eviction decisions read.
    "stowage.io/qos",
    "stowage.io/needs-contiguous-memory",
    "stowage.io/checkpoint",
    "koordinator.sh/qosClass",
)
"""Pod labels/annotations worth reporting; everything else stays on the node."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodsSettings:
    source: str = "auto"
    """Where pods come from: ``apiserver``, ``kubelet``, ``auto`` (API server in a cluster,
    else the kubelet when its URL is given) or ``none``."""
    kubeconfig: str | None = None
    """Kubeconfig file for the API server; None = in-cluster service account."""
    kubelet_url: str | None = None
    """Kubelet base URL (``https://$HOST_IP:10250``) for the ``kubelet`` source."""
    kubelet_ca_file: str | None = None
    """CA bundle for the kubelet's serving certificate; None skips verification (kubelets
    commonly serve self-signed certificates)."""
    token_file: str | None = None
    """Bearer token for the kubelet; the projected service-account token in a cluster."""
    label_keys: tuple[str, ...] = DEFAULT_LABEL_KEYS
    timeout_s: float = 5.0
    """Per-request timeout: a slow API server must not stall a collection cycle."""

    def __post_init__(self) -> None:
        if self.source not in ("auto", "apiserver", "kubelet", "none"):
            raise ConfigError(
                f"pods source {self.source!r}: expected auto, apiserver, kubelet or none"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReporterSettings:
    coordinator_url: str | None = None
    """Base URL of the coordinator; None prints reports instead of sending them."""
    token_file: str | None = None
    """File holding the bearer token, re-read on every send because projected tokens rotate."""
    connect_timeout_s: float = 3.0
    total_timeout_s: float = 10.0
    """A report older than one interval is worth less than the next one: keep this near it."""
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 60.0
    """Capped so a node rejoins within a minute of the coordinator coming back."""
    ca_file: str | None = None
    """CA bundle for an https coordinator; None uses the system store."""
    fan_out: bool = False
    """Send every report to every address the coordinator's host name resolves to (a
    headless Service: every replica), so all replicas hold every node's signals."""
    refresh_reports: int = 30
    """The report goes out whole every this many reports (5 min at the default interval);
    in between, pods only when they changed and no memory-contiguity detail
    (:mod:`agent.reportdelta`). 0 sends every report whole."""

    def __post_init__(self) -> None:
        for name in ("connect_timeout_s", "total_timeout_s", "backoff_initial_s", "backoff_max_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.backoff_max_s < self.backoff_initial_s:
            raise ConfigError("backoff_max_s must be at least backoff_initial_s")
        if not 0 <= self.refresh_reports <= 1_000_000:
            raise ConfigError(f"refresh_reports must be 0..1000000, got {self.refresh_reports}")


@dataclass(frozen=True, slots=True, kw_only=True)
class EnforcerSettings:
    enabled: bool = False
    """Apply the coordinator's best-effort CPU quota to this node's cgroups. Off for a
    hand-run agent; the DaemonSet turns it on. Even on, nothing is written until a
    directive carries a quota or local bounds (the coordinator decides, leader only)."""
    journal: str = "/var/lib/stowage/enforcer.json"
    """Original values of every file changed, kept on a hostPath so a restarted agent
    (after a crash or SIGKILL) restores them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings:
    paths: HostPaths
    node_name: str
    interval_s: float = 10.0
    """Report period. 10 s matches kubelet's housekeeping and PSI's avg10 window."""
    jitter_frac: float = 0.1
    """Each wait is interval × (1 ± jitter) so a fleet does not report in lockstep."""
    collector_timeout_s: float = 5.0
    collectors: tuple[str, ...] = ()
    """Enabled collectors, in report order; empty = every default-enabled collector."""
    pods: PodsSettings = field(default_factory=PodsSettings)
    reporter: ReporterSettings = field(default_factory=ReporterSettings)
    enforcer: EnforcerSettings = field(default_factory=EnforcerSettings)

    def __post_init__(self) -> None:
        if not self.node_name:
            raise ConfigError("node name is empty: pass --node-name or set NODE_NAME")
        if not 0.05 <= self.interval_s <= 3600:
            raise ConfigError(f"interval {self.interval_s} s: expected 0.05 to 3600")
        if not 0 <= self.jitter_frac < 1:
            raise ConfigError(f"jitter {self.jitter_frac}: expected 0 <= jitter < 1")
        if not 0 < self.collector_timeout_s <= 600:
            # Finite: the deadline is what keeps a hung collector from costing the cycle.
            raise ConfigError(
                f"collector timeout {self.collector_timeout_s} s: expected 0 < timeout <= 600"
            )
