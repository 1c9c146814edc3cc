"""The report load generator: its bodies are real reports, and it counts what it gets."""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from msgspec import structs

from agent.reportdelta import REFRESH_ONLY, UNCHANGED
from common import codec
from common.schema import (
    SECTIONS,
    GpuSection,
    MemfragSection,
    NodeReport,
    NumaSection,
    PodsSection,
    is_absent,
)
from coordinator.auth import StaticTokens
from hack.loadgen import reports as loadgen
from tests.coordinator.ingest.conftest import MakeRig, settings_with
from tests.hosts import FakeClock
from tests.kit import free_port

REPO = Path(__file__).resolve().parents[3]
NODES = 10
NAMES = [loadgen.node_name(i) for i in range(NODES)]
TOKENS = {f"token-{name}": name for name in NAMES}
NOW = FakeClock().wall()
"""The rig's wall clock: reports dated later than it (plus an allowance) are refused."""


def test_bodies_are_the_encoded_reports() -> None:
    bodies = loadgen.Bodies(NAMES, now=1_790_000_000.0)
    for i, seq, at in ((0, 0, 1_790_000_000.0), (3, 7, 1_790_000_010.5), (9, 2**40, 1.0)):
        want = loadgen.build_report(
            NAMES[i], seq=seq, now=1_790_000_000.0, variant=i % loadgen.VARIANTS
        )
        assert bodies.body(i, seq, at) == codec.encode(structs.replace(want, measured_at=at))


def test_with_a_refresh_every_nth_report_is_whole_else_as_agents_send_between() -> None:
    bodies = loadgen.Bodies(NAMES, now=1_790_000_000.0, refresh=3)
    for seq in range(7):
        want = loadgen.build_report(NAMES[4], seq=seq, now=1_790_000_000.0, variant=4)
        if seq % 3:
            assert isinstance(want.memfrag, MemfragSection)
            slim = structs.replace(
                want.memfrag, zones=REFRESH_ONLY, hugepages=REFRESH_ONLY, compaction=REFRESH_ONLY
            )
            want = structs.replace(want, pods=UNCHANGED, memfrag=slim)
        assert bodies.body(4, seq, 5.0) == codec.encode(structs.replace(want, measured_at=5.0))


@pytest.mark.parametrize("variant", range(loadgen.VARIANTS))
def test_reports_look_like_a_busy_gpu_node(variant: int) -> None:
    report = codec.decode_report(codec.encode(loadgen.build_report("n", variant=variant)))
    assert isinstance(report.gpus, GpuSection)
    assert isinstance(report.numa, NumaSection)
    assert isinstance(report.pods, PodsSection)
    assert len(report.gpus.devices) == 8
    assert len(report.numa.nodes) == 2
    assert 28 <= len(report.pods.pods) <= 35
    assert not any(is_absent(getattr(report, name)) for name in SECTIONS)
    assert 15_000 < len(codec.encode(report)) < 40_000


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert loadgen.percentile(values, 50) == 50.0
    assert loadgen.percentile(values, 99) == 99.0
    assert loadgen.percentile([7.0], 99) == 7.0
    assert math.isnan(loadgen.percentile([], 50))


async def serve(make_rig: MakeRig, tokens: dict[str, str] = TOKENS) -> Any:
    rig = await make_rig(settings_with(static_tokens=tokens), StaticTokens(tokens), NAMES)
    return rig, str(rig.client.server.make_url("")).rstrip("/")


async def test_sends_every_nodes_reports_with_its_token(make_rig: MakeRig) -> None:
    rig, url = await serve(make_rig)
    node_tokens = {node: token for token, node in TOKENS.items()}
    plan = loadgen.Plan(
        url=url, nodes=NODES, requests=35, concurrency=4, node_tokens=node_tokens, now=NOW
    )

    result = await loadgen.run_client(plan)

    summary = loadgen.summary(result)
    assert summary["statuses"] == {"200": 35}
    assert summary["errors"] == {}
    assert summary["answers"] == 35
    assert summary["reports_per_s"] > 0
    assert summary["p50_ms"] <= summary["p99_ms"]
    assert set(rig.cluster.signals) == set(NAMES)
    assert rig.outcomes() == {"accepted": 35}


async def test_each_node_counts_its_seq_up(make_rig: MakeRig) -> None:
    rig, url = await serve(make_rig)
    node_tokens = {node: token for token, node in TOKENS.items()}
    plan = loadgen.Plan(
        url=url, nodes=NODES, requests=25, concurrency=1, node_tokens=node_tokens, now=NOW
    )
    seqs: dict[str, list[int]] = {}
    apply = rig.cluster.apply_report

    def record(report: NodeReport, received_at: float) -> bool:
        seqs.setdefault(report.node, []).append(report.seq)
        return apply(report, received_at)

    rig.cluster.apply_report = record  # type: ignore[method-assign]
    await loadgen.run_client(plan)

    assert [seqs[n] for n in NAMES] == [[0, 1, 2]] * 5 + [[0, 1]] * 5


async def test_refusals_are_counted_by_status(make_rig: MakeRig) -> None:
    rig, url = await serve(make_rig)
    plan = loadgen.Plan(
        url=url, nodes=NODES, requests=20, concurrency=3, token=f"token-{NAMES[0]}", now=NOW
    )

    result = await loadgen.run_client(plan)

    assert result.statuses == {"200": 2, "403": 18}
    assert loadgen.summary(result)["reports_per_s"] < loadgen.summary(result)["answers_per_s"]


async def test_transport_errors_are_counted_by_kind() -> None:
    plan = loadgen.Plan(url=f"http://127.0.0.1:{free_port()}", nodes=2, requests=3, concurrency=1)

    result = await loadgen.run_client(plan)

    assert result.statuses == {}
    assert result.errors == {"ConnectionRefusedError": 3}


async def test_command_line_prints_one_json_summary(make_rig: MakeRig, tmp_path: Path) -> None:
    rig, url = await serve(make_rig)
    rig.clock.wall_s = time.time()  # the command dates its reports by the real clock
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({node: token for token, node in TOKENS.items()}))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hack.loadgen.reports",
        f"--url={url}",
        f"--nodes={NODES}",
        "--requests=12",
        "--concurrency=2",
        f"--node-tokens={tokens}",
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(120):
        out, err = await proc.communicate()

    assert proc.returncode == 0, err.decode()
    summary = json.loads(out)
    assert summary["statuses"] == {"200": 12}
    assert summary["answers"] == 12
    assert rig.outcomes() == {"accepted": 12}
