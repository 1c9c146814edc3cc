"""Every coordinator metric, on a registry the coordinator owns (one per app or test)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass
class CoordinatorMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.request_seconds = Histogram(
            "stowage_request_duration_seconds",
            "Time to answer one HTTP request, by verb (filter, prioritize, report, …).",
            ["verb"],
            registry=r,
            buckets=LATENCY_BUCKETS,
        )
        self.reports = Counter(
            "stowage_reports",
            "Agent reports, by outcome (accepted, or the reason they were rejected).",
            ["outcome"],
            registry=r,
        )
        # Resolved once: every report passes through these (a labels() lookup takes a lock).
        self.report_seconds = self.request_seconds.labels("report")
        self.reports_accepted = self.reports.labels("accepted")
        self.stale_nodes = Gauge(
            "stowage_stale_nodes",
            "Nodes without a fresh report: their signals are unknown (neutral).",
            registry=r,
        )
        self.known_nodes = Gauge("stowage_nodes", "Nodes in the cluster state.", registry=r)
        self.patches = Counter(
            "stowage_node_patches",
            "Node annotation patches, by result (ok, error).",
            ["result"],
            registry=r,
        )
        self.leader = Gauge(
            "stowage_leader", "1 while this replica holds the leader Lease.", registry=r
        )
        self.publisher_ticks = Counter(
            "stowage_publisher_ticks",
            "Passes of the leader's publisher over the nodes (stops counting if it stalls).",
            registry=r,
        )
        self.policy_seconds = Histogram(
            "stowage_policy_duration_seconds",
            "Time a policy took to score the candidate nodes of one request.",
            ["policy"],
            registry=r,
            buckets=LATENCY_BUCKETS,
        )
        self.events = Counter(
            "stowage_events",
            "Kubernetes Events the leader recorded, by result (sent, duplicate, rate_limited,"
            " not_leader, failed).",
            ["result"],
            registry=r,
        )
        self.be_throttle_changes = Counter(
            "stowage_be_throttle_changes",
            "Best-effort CPU quota changes decided, by change (tightened, relaxed, released).",
            ["change"],
            registry=r,
        )
        self.be_throttled_nodes = Gauge(
            "stowage_be_throttled_nodes",
            "Nodes whose best-effort pods have a CPU quota now (this replica's controller).",
            registry=r,
        )
        self.watch_restarts = Counter(
            "stowage_watch_restarts",
            "List-and-watch restarts, by resource and cause (expired, error).",
            ["resource", "cause"],
            registry=r,
        )
        self.evictions = Counter(
            "stowage_evictions",
            "Pods acted on by the eviction executor, by trigger (preemption, pressure) and"
            " outcome (evicted, dry-run, blocked by a PDB, gone, error).",
            ["trigger", "outcome"],
            registry=r,
        )
        self.eviction_plans = Counter(
            "stowage_eviction_plans",
            "Eviction plans and planner refusals, by trigger and decision (evicted, dry-run,"
            " partial, awaiting-approval, expired, refused, not-leader, error).",
            ["trigger", "decision"],
            registry=r,
        )
        self.eviction_approvals_pending = Gauge(
            "stowage_eviction_approvals_pending",
            "Preemption plans published on their pending pods, awaiting approval.",
            registry=r,
        )
