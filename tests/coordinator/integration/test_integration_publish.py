"""Reports in, damped ``stowage.io/`` annotations out: the real coordinator publishing
to the emulated API server, counted where the PATCHes land and read back with kubectl."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent.metrics import AgentMetrics
from agent.reporter import Reporter
from agent.settings import ReporterSettings
from common import annotations as ann
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

GIB = rig.GIB
NODE = "worker-1"


async def test_a_contiguity_change_is_patched_exactly_once_and_kubectl_reads_it(
    api: rig.RecordingKubeApi, start: Start, tmp_path: Path
) -> None:
    api.add_node(NODE, capacity={"cpu": "16", "memory": "64Gi"})
    token = api.agent_token(NODE)
    coordinator = await start(rig.settings(change_pct=5.0))

    # Leading, it publishes the node once as it is: no report yet.
    await rig.eventually(lambda: api.patches(NODE), "the first patch")
    assert coordinator.leading
    assert api.annotations(NODE)[ann.STATE].startswith("stale: no report yet;at=")
    assert rig.contiguity(api.annotations(NODE)) is None

    status, _ = await coordinator.report(rig.node_report(NODE, free_2mib_b=20 * GIB), token)
    assert status == 200
    await rig.eventually(
        lambda: rig.contiguity(api.annotations(NODE)) == "20.00Gi", "contiguity published"
    )
    assert len(api.patches(NODE)) == 2
    assert api.annotations(NODE)[ann.STATE].startswith("fresh;at=")

    # The same value again, then a move of 1 GiB of 64 (1.6 points < change_pct): no patch.
    for seq, free in ((2, 20 * GIB), (3, 21 * GIB)):
        status, _ = await coordinator.report(
            rig.node_report(NODE, free_2mib_b=free, seq=seq), token
        )
        assert status == 200
        await rig.publisher_ticks(coordinator, 3)
    assert coordinator.cluster.signals[NODE].contiguous_2mib_b == 21 * GIB
    assert len(api.patches(NODE)) == 2
    assert rig.contiguity(api.annotations(NODE)) == "20.00Gi"

    # 10 GiB less (15.6 points): exactly one patch, carrying the new value.
    status, _ = await coordinator.report(rig.node_report(NODE, free_2mib_b=10 * GIB, seq=4), token)
    assert status == 200
    await rig.eventually(
        lambda: rig.contiguity(api.annotations(NODE)) == "10.00Gi", "the change published"
    )
    await rig.publisher_ticks(coordinator, 3)
    patches = api.patches(NODE)
    assert len(patches) == 3
    assert {p.agent for p in patches} == {coordinator.agent}
    written = patches[-1].body["metadata"]["annotations"]
    assert written[ann.CONTIGUITY].startswith("free_2mib=10.00Gi;at=")
    assert coordinator.metric("stowage_node_patches_total", {"result": "ok"}) == 3

    if rig.KUBECTL is None:
        pytest.skip("kubectl is not on PATH: the independent read-back is not possible")
    read = await rig.kubectl(
        api.url,
        tmp_path,
        "get",
        "node",
        NODE,
        "-o",
        r"jsonpath={.metadata.annotations.stowage\.io/contiguity}",
    )
    assert read == written[ann.CONTIGUITY]
    assert ann.parse(read)[0] == {"free_2mib": "10.00Gi"}


async def test_a_silent_node_turns_stale_and_loses_its_live_annotations(
    api: rig.RecordingKubeApi, start: Start, tmp_path: Path
) -> None:
    """The agent's own Reporter sends one report; then the node falls silent for longer
    than ``report_ttl_s``."""
    api.add_node(NODE, capacity={"cpu": "16", "memory": "64Gi"})
    coordinator = await start(rig.settings(report_ttl_s=1.0))
    await rig.eventually(lambda: coordinator.services.synced.is_set(), "caches synced")
    token_file = tmp_path / "token"
    token_file.write_text(api.agent_token(NODE) + "\n")
    reporter = Reporter(
        ReporterSettings(coordinator_url=coordinator.url, token_file=str(token_file)),
        metrics=AgentMetrics(),
        rng=random.Random(1),
    )
    try:
        directives = await reporter.send_once(
            rig.node_report(NODE, free_2mib_b=8 * GIB, cpu_pressure_pct=12.5)
        )
    finally:
        await reporter.stop()
    assert directives is not None and directives.node == NODE

    def fresh() -> bool:
        found = api.annotations(NODE)
        return found.get(ann.STATE, "").startswith("fresh") and ann.PRESSURE in found

    await rig.eventually(fresh, "the fresh report published")
    published = api.annotations(NODE)
    assert rig.contiguity(published) == "8.00Gi"
    assert ann.parse(published[ann.PRESSURE])[0] == {"cpu": "12.5", "memory": "12.5"}
    fresh_patches = len(api.patches(NODE))

    def stale() -> bool:
        return api.annotations(NODE).get(ann.STATE, "").startswith("stale")

    await rig.eventually(stale, "the node published as stale", timeout_s=10.0)
    found = api.annotations(NODE)
    assert found[ann.STATE].startswith("stale: no report since ")
    for key in (ann.CONTIGUITY, ann.PRESSURE, ann.DIRECTIVES):
        assert key not in found
    assert ann.FULLNESS in found  # fullness comes from the API server's pods, not the agent
    last = api.patches(NODE)[-1].body["metadata"]["annotations"]
    assert last[ann.CONTIGUITY] is None and last[ann.PRESSURE] is None  # merge-patch deletes
    assert len(api.patches(NODE)) == fresh_patches + 1
    assert NODE not in coordinator.cluster.signals
    assert coordinator.metric("stowage_stale_nodes") == 1
