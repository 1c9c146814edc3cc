"""The agent's real Reporter delivering to the real ingest endpoint over TCP."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent.metrics import AgentMetrics
from agent.reporter import Reporter, ReportRejectedError
from agent.settings import ReporterSettings
from coordinator.state.reports import signals_of
from tests.coordinator.ingest.conftest import IngestRig, report_for


async def test_reporter_delivers_to_ingest_and_keeps_the_directives(
    rig: IngestRig, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("token-of-node-a\n")
    url = str(rig.client.server.make_url("")).rstrip("/")
    metrics = AgentMetrics()
    reporter = Reporter(
        ReporterSettings(coordinator_url=url, token_file=str(token)),
        metrics=metrics,
        clock=rig.clock,
        rng=random.Random(1),
    )
    report = report_for("node-a", seq=3)
    try:
        directives = await reporter.send_once(report)
        with pytest.raises(ReportRejectedError) as refused:
            await reporter.send_once(report_for("node-b", seq=4))
    finally:
        await reporter.stop()

    assert directives is not None
    assert directives.node == "node-a"
    assert directives.ttl_s == rig.services.settings.ingest.directive_ttl_s
    assert reporter.current_directives() == directives
    assert rig.cluster.freshness.measured_at["node-a"] == report.measured_at
    assert rig.cluster.signals["node-a"] == signals_of(report)
    assert refused.value.status == 403
    assert "node-b" not in rig.cluster.signals
    assert metrics.registry.get_sample_value("stowage_agent_reports_sent_total") == 1
    assert rig.outcomes() == {"accepted": 1, "node_mismatch": 1}
