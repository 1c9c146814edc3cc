"""``/debug/patrol`` on the debug listener and ``stowage patrol`` over it: the heatmap's
rows, each node in words, and the PNG, from a real server on 127.0.0.1."""

from __future__ import annotations

import argparse
import asyncio
import io
import math
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from cli import patrol as patrol_cli
from coordinator import app as coordinator_app
from coordinator.config import CoordinatorSettings, PatrolSettings
from coordinator.consolidation.patrol import SAMPLE_S, Patrol
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import Services
from hack.bench.ingest import gpu_node
from tests.coordinator.consolidation.test_patrol import report
from tests.hosts import FakeClock

IDLE, BUSY, SILENT = "gpu-node-00000", "gpu-node-00001", "gpu-node-00002"


@pytest.fixture
async def served(aiohttp_server: Any) -> str:
    clock = FakeClock(mono_s=86400.0)
    settings = CoordinatorSettings(patrol=PatrolSettings(window="5m"))
    metrics = CoordinatorMetrics()
    cluster = LiveCluster(settings, clock, metrics)
    cluster.replace_nodes([gpu_node(n) for n in (IDLE, BUSY, SILENT)])
    watch = Patrol(cluster, settings.patrol, clock)
    # 5 minutes: the idle node at 10 % throughout, the busy one at 80 % then 100 %, and
    # the last bucket (just begun) unsampled.
    for k in range(9):
        cluster.apply_report(report(IDLE, 10.0), clock.monotonic())
        cluster.apply_report(report(BUSY, 80.0 if k < 5 else 100.0), clock.monotonic())
        watch.sample()
        clock.advance(SAMPLE_S)
    services = Services(settings, clock, metrics, cluster, authenticator=None)  # type: ignore[arg-type]
    app = coordinator_app.make_debug_app(services, watch=watch)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def run(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    patrol_cli.add_arguments(parser)
    out = io.StringIO()
    code = await asyncio.to_thread(patrol_cli.main, parser.parse_args(list(argv)), out)
    return code, out.getvalue()


async def test_the_words_name_each_sampled_node(served: str) -> None:
    code, text = await run("--coordinator", served, "--window", "5m")
    assert code == 0
    assert text == (
        "2 nodes sampled over 5m, 1 under 70% (consolidation candidates)\n"
        "gpu-node-00000  mean 10.0%  peak 10.0%  sampled 90%  candidate\n"
        "gpu-node-00001  mean 88.9%  peak 100.0%  sampled 90%\n"  # (5 × 80 + 4 × 100) / 9
    )


async def test_the_heatmap_rows_and_the_png(served: str, tmp_path: Path) -> None:
    answer = await asyncio.to_thread(
        patrol_cli.debugask.ask, served, "/debug/patrol", {"window": "5m"}
    )
    assert answer["window"] == {"name": "5m", "bucket_s": 30.0, "buckets": 10}
    rows = {n["node"]: n["heat"] for n in answer["nodes"]}
    assert rows == {IDLE: [10.0] * 9 + [None], BUSY: [80.0] * 5 + [100.0] * 4 + [None]}
    png = tmp_path / "patrol.png"
    code, text = await run("--coordinator", served, "--window", "5m", "--png", str(png))
    assert code == 0 and text.endswith(f"heatmap written to {png}\n")
    pixels = matplotlib.image.imread(png)
    assert pixels.shape[1] == 640 and pixels.shape[0] > 100  # 8 in wide at 80 dpi
    assert not math.isnan(float(pixels.mean()))


async def test_an_unknown_window_is_400_naming_the_choices(served: str) -> None:
    with pytest.raises(
        patrol_cli.debugask.AskError,
        match=r"window: expected one of 5m, 1h, 1d, got '2h' \(HTTP 400\)",
    ):
        await asyncio.to_thread(patrol_cli.debugask.ask, served, "/debug/patrol", {"window": "2h"})


async def test_an_unreachable_coordinator_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = await run("--coordinator", "http://127.0.0.1:9")
    assert (code, text) == (2, "")
    assert capsys.readouterr().err.startswith(
        "stowage patrol: cannot ask http://127.0.0.1:9/debug/patrol"
    )
