"""The agent's own metrics, on a registry it owns (never the process-global one)."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from common.listener import Limits, Listener


@dataclass
class AgentMetrics:
    """Every metric the agent exports; one instance per agent process (or per test)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.collector_duration = Histogram(
            "stowage_agent_collector_duration_seconds",
            "Time one collector took to read its signal.",
            ["collector"],
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5),
        )
        self.collector_success = Gauge(
            "stowage_agent_collector_success",
            "1 if the collector's last run produced data or a normal absence, 0 on error.",
            ["collector"],
            registry=r,
        )
        self.collector_absent = Counter(
            "stowage_agent_collector_absent",
            "Sections reported absent, by reason class.",
            ["collector", "reason"],
            registry=r,
        )
        self.reports_sent = Counter(
            "stowage_agent_reports_sent",
            "Reports the coordinator accepted.",
            registry=r,
        )
        self.report_failures = Counter(
            "stowage_agent_report_failures",
            "Failed report deliveries, by cause.",
            ["cause"],
            registry=r,
        )
        self.directive_refusals = Counter(
            "stowage_agent_directive_refusals",
            "Pods a directive named best-effort that this node refused to throttle (its own"
            " view of them says system or latency-sensitive), by reason; per directive.",
            ["reason"],
            registry=r,
        )
        self.reports_dropped = Counter(
            "stowage_agent_reports_superseded",
            "Reports replaced by a newer one before they could be delivered.",
            registry=r,
        )


METRICS_LIMITS = Limits(read_timeout_s=10.0, keepalive_timeout_s=120.0, max_connections=64)
"""Prometheus (scraping every 15 s or so, one kept-alive connection) and kubelet's probes
need a few connections: 64 leave room for several scrapers, while slow or idle clients
cannot hold the agent's file descriptors (:mod:`common.listener`)."""


async def serve(
    metrics: AgentMetrics, host: str, port: int, limits: Limits = METRICS_LIMITS
) -> Listener:
    """Serve ``/metrics`` (Prometheus text format) and ``/healthz`` until the listener is
    stopped. The caller owns the returned listener."""

    async def scrape(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), content_type="text/plain")

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/healthz", healthz)
    site = Listener(app, host, port, limits)
    await site.start()
    return site
