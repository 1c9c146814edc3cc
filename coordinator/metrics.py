"""Every coordinator metric, on a registry the coordinator owns (one per app or test)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


NODE_GAUGES: Final = (
    ("stowage_node_fullness", "fullness", "Share of the node's fullest resource its pods hold"
     " (the largest share of the stowage.io/fullness annotation), 0..1."),
    ("stowage_node_gpu_free_milli", "gpu_free_milli", "Free milli-GPU of the node."),
    ("stowage_node_gpu_frag_milli", "gpu_frag_milli", "FGD fragmentation of the node's free"
     " GPU (milli-GPU typical pods could not use); absent on nodes without GPUs."),
    ("stowage_node_memory_contiguity", "contiguity", "Share of the node's free memory in"
     " blocks of 2 MiB or more, 0..1, from its latest fresh report."),
    ("stowage_node_report_age_seconds", "age_s", "Seconds since the node's latest report was"
     " received (this replica's clock); absent before its first."),
    ("stowage_node_stale", "stale", "1 while the node has no fresh report (signals unknown)."),
    ("stowage_node_throttled", "throttled", "1 while the node's best-effort pods have a CPU"
     " quota (this replica's colocation controller)."),
)  # fmt: skip
"""(metric, key of the node's tile, help) of each per-node gauge labelled ``node`` only."""
NODE_PSI: Final = (("cpu", "psi_cpu"), ("memory", "psi_memory"))
"""``stowage_node_psi_some_percent``'s ``resource`` label values, and their tile keys."""


class NodeGauges(Collector):
    """Per-node gauges, one series per node per signal, from the node view's tiles
    (:mod:`coordinator.nodeview`) that the ``/metrics`` handler puts in :attr:`tiles` right
    before each scrape.

    Only the latest tiles are exported: a node that left the cluster is not in them, so its
    series go with it, and the series stay bounded by the nodes there are now. A value the
    view does not know (null) is left out rather than exported as a made-up number."""

    def __init__(self) -> None:
        self.tiles: Sequence[Mapping[str, Any]] = ()
        """Every node's tile as of the latest scrape (replaced whole, never changed)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        tiles = self.tiles
        for metric, key, help_text in NODE_GAUGES:
            family = GaugeMetricFamily(metric, help_text, labels=["node"])
            for tile in tiles:
                value = tile[key]
                if value is not None:
                    family.add_metric([tile["name"]], float(value))
            yield family
        psi = GaugeMetricFamily(
            "stowage_node_psi_some_percent",
            "PSI some of the node, in percent, as scoring reads it (the rate over the agent's"
            " last interval, avg10 where it has none), by resource (cpu, memory).",
            labels=["node", "resource"],
        )
        for tile in tiles:
            for resource, key in NODE_PSI:
                value = tile[key]
                if value is not None:
                    psi.add_metric([tile["name"], resource], float(value))
        yield psi


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
        self.loop_lag = Gauge(
            "stowage_event_loop_lag_seconds",
            "How far behind the event loop runs what is due (readiness fails above"
            " server.ready_max_loop_lag_s).",
            registry=r,
        )
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
        self.approval_webhook = Counter(
            "stowage_approval_webhook",
            "Plans posted to evictions.approval_webhook and callbacks, by outcome (sent,"
            " failed, rate-limited, approved, denied, refused).",
            ["outcome"],
            registry=r,
        )
        self.consolidation_candidates = Gauge(
            "stowage_consolidation_candidates",
            "Nodes the utilisation patrol finds under patrol.threshold_pct, by the longest"
            " window they stayed under (5m, 1h, 1d).",
            ["window"],
            registry=r,
        )
        self.consolidation_marks = Counter(
            "stowage_consolidation_marks",
            "stowage.io/consolidate marks the leader wrote on Nodes, by action (marked, cleared).",
            ["action"],
            registry=r,
        )
        self.queue_cpu_hours = Gauge(
            "stowage_queue_cpu_hours",
            "CPU core-hours each queue's pods held (allocated: requested) and used (measured,"
            " split by request) over a patrol window (5m, 1h, 1d).",
            ["queue", "window", "kind"],
            registry=r,
        )
        self.queue_gpu_hours = Gauge(
            "stowage_queue_gpu_hours",
            "GPU-hours each queue's pods held (allocated) and used (measured utilisation,"
            " split by request) over a patrol window (5m, 1h, 1d).",
            ["queue", "window", "kind"],
            registry=r,
        )
        self.scale_hint_nodes = Gauge(
            "stowage_scale_hint_nodes",
            "Nodes the autoscaling hints would add, by queue and node group (0: the queue"
            " lacks room but no known group fits its pending work).",
            ["queue", "group"],
            registry=r,
        )
        self.scale_hint_gap = Gauge(
            "stowage_scale_hint_gap",
            "Room a queue lacks, by resource, in the resource's units (cpu in cores).",
            ["queue", "resource"],
            registry=r,
        )
        self.scale_deadlocked_pods = Gauge(
            "stowage_scale_deadlocked_pods",
            "Pending pods whose node-group selector matches no node group known: no"
            " autoscaler will add a node for them.",
            ["queue"],
            registry=r,
        )
        self.nodes = NodeGauges()
        r.register(self.nodes)
