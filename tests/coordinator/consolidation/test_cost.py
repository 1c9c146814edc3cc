"""Cost per queue: CPU- and GPU-hours allocated and used by each queue (a PodGroup's
``spec.queue``, else the namespace) over the patrol windows, every figure worked out by
hand; the gauges, ``/debug/patrol/queues`` and ``stowage top --queues`` on a real server."""

from __future__ import annotations

import argparse
import asyncio
import io
from typing import Any

import msgspec
import pytest
from prometheus_client import generate_latest

from cli import top
from coordinator import app as coordinator_app
from coordinator.config import CoordinatorSettings, PatrolSettings
from coordinator.consolidation import cost
from coordinator.consolidation.patrol import SAMPLE_S, Patrol
from coordinator.consolidation.windows import BY_NAME
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import Services
from hack.bench.ingest import gpu_node
from tests.hosts import FakeClock
from tests.kit import build_report

A, B = "gpu-node-00000", "gpu-node-00001"  # 222 allocatable CPUs and 8 GPUs each
GPU_UTIL = [100.0, 100.0, 50.0, 50.0, 0.0, 0.0, 0.0, 0.0]  # 3.0 GPUs busy


def report(node: str, cpu_used_pct: float, gpu_util: list[float]):  # noqa: ANN201
    base = build_report(node)
    cpu = msgspec.structs.replace(base.usage.cpu, used_pct=cpu_used_pct)
    devices = [
        msgspec.structs.replace(d, util_gpu_pct=u)
        for d, u in zip(base.gpus.devices, gpu_util, strict=True)
    ]
    return msgspec.structs.replace(
        base,
        usage=msgspec.structs.replace(base.usage, cpu=cpu),
        gpus=msgspec.structs.replace(base.gpus, devices=devices),
    )


def pod(name: str, namespace: str, node: str | None, cpu: int, gpus: int = 0,
        group: str | None = None) -> dict[str, Any]:  # fmt: skip
    requests: dict[str, str] = {"cpu": str(cpu)}
    limits: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if group is not None:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": requests, "limits": limits}}]
    }
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def podgroup(namespace: str, name: str, queue: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"queue": queue}}


def rig() -> tuple[LiveCluster, Patrol, FakeClock, CoordinatorSettings, CoordinatorMetrics]:
    """A (reporting 12 % CPU, GPUs 3.0 busy) and B (silent), and on them:

    * ``team-a/train`` (PodGroup ``pg``, queue ``research``): 10 CPUs, 4 GPUs on A;
    * ``team-b/serve`` (no PodGroup): 30 CPUs, 2 GPUs on A;
    * ``team-b/etl``: 20 CPUs on B;
    * ``team-c/odd``: 2 CPUs on B, naming a PodGroup nobody has (its namespace's queue);
    * ``team-d/waiting``: pending, so counted nowhere.
    """
    clock = FakeClock(mono_s=86400.0)  # on a bucket boundary of every window
    settings = CoordinatorSettings(patrol=PatrolSettings(window="5m"))
    metrics = CoordinatorMetrics()
    cluster = LiveCluster(settings, clock, metrics)
    cluster.replace_nodes([gpu_node(A), gpu_node(B)])
    cluster.podgroups.replace([podgroup("team-a", "pg", "research")])
    for p in (
        pod("train", "team-a", A, 10, 4, group="pg"),
        pod("serve", "team-b", A, 30, 2),
        pod("etl", "team-b", B, 20),
        pod("odd", "team-c", B, 2, group="missing"),
        pod("waiting", "team-d", None, 8, 1),
    ):
        cluster.upsert_pod(p)
    return cluster, Patrol(cluster, settings.patrol, clock), clock, settings, metrics


def run_for(cluster: LiveCluster, patrol: Patrol, clock: FakeClock, samples: int) -> None:
    for _ in range(samples):
        assert cluster.apply_report(report(A, 12.0, GPU_UTIL), clock.monotonic())
        cluster.expire()
        patrol.sample()
        clock.advance(SAMPLE_S)


def hours(patrol: Patrol, window: str) -> dict[str, tuple[float, float, float, float]]:
    return {
        c.queue: (c.cpu_allocated_h, c.cpu_used_h, c.gpu_allocated_h, c.gpu_used_h)
        for c in patrol.costs.over(BY_NAME[window], patrol.now())
    }


# Twelve samples of 30 s: 360 s, 0.1 h. A uses 12 % of 222 CPUs = 26.64 cores, split by
# request between train (10 of 40 requested: 6.66) and serve (30 of 40: 19.98); its 3.0
# busy GPUs split by GPUs held, train 4 of 6 (2.0) and serve 2 of 6 (1.0). B is silent:
# its pods are allocated, never used. (CPU-h allocated, used, GPU-h allocated, used.)
RESEARCH = (1.0, 0.666, 0.4, 0.2)
TEAM_B = (5.0, 1.998, 0.2, 0.1)  # serve and etl (20 CPUs on B)
TEAM_C = (0.2, 0.0, 0.0, 0.0)


def test_each_queue_is_charged_what_its_pods_held_and_used() -> None:
    cluster, patrol, clock, _, _ = rig()
    run_for(cluster, patrol, clock, 12)
    found = hours(patrol, "1h")
    assert sorted(found) == ["research", "team-b", "team-c"]  # team-d's pod is pending
    assert found["research"] == pytest.approx(RESEARCH)
    assert found["team-b"] == pytest.approx(TEAM_B)
    assert found["team-c"] == pytest.approx(TEAM_C)
    # Five minutes ending now (in the 13th bucket): the last 9 samples only.
    assert hours(patrol, "5m")["research"] == pytest.approx((0.75, 0.4995, 0.3, 0.15))


def test_a_queue_without_pods_for_a_day_is_forgotten() -> None:
    cluster, patrol, clock, _, _ = rig()
    run_for(cluster, patrol, clock, 1)
    cluster.remove_pod(pod("train", "team-a", A, 10, 4, group="pg"))
    run_for(cluster, patrol, clock, 2)
    assert "research" in hours(patrol, "1d")  # still within the day
    clock.advance(86400.0)
    run_for(cluster, patrol, clock, 1)
    assert "research" not in hours(patrol, "1d") and "team-b" in hours(patrol, "1d")
    assert "research" not in patrol.costs._rings  # forgotten, not only out of the window


def test_the_gauges_carry_each_queue_and_drop_a_forgotten_one() -> None:
    cluster, patrol, clock, _, metrics = rig()
    run_for(cluster, patrol, clock, 12)
    cost.publish(patrol.costs, patrol.now(), metrics)
    text = generate_latest(metrics.registry).decode()
    gpu = 'stowage_queue_gpu_hours{kind="allocated",queue="research",window="1h"}'
    cpu = 'stowage_queue_cpu_hours{kind="used",queue="team-b",window="1h"}'
    assert float(text.split(gpu + " ")[1].split()[0]) == pytest.approx(0.4)
    assert float(text.split(cpu + " ")[1].split()[0]) == pytest.approx(1.998)
    for p in cluster.facts.copy().values():
        cluster.remove_pod({"metadata": {"name": p.name, "namespace": p.namespace, "uid": p.uid}})
    clock.advance(2 * 86400.0)
    run_for(cluster, patrol, clock, 1)
    cost.publish(patrol.costs, patrol.now(), metrics)
    assert "stowage_queue_gpu_hours{" not in generate_latest(metrics.registry).decode()


@pytest.fixture
async def served(aiohttp_server: Any) -> str:
    cluster, patrol, clock, settings, metrics = rig()
    run_for(cluster, patrol, clock, 12)
    services = Services(settings, clock, metrics, cluster, authenticator=None)  # type: ignore[arg-type]
    server = await aiohttp_server(coordinator_app.make_debug_app(services, watch=patrol))
    return str(server.make_url("")).rstrip("/")


async def test_top_prints_each_queue_from_the_debug_listener(served: str) -> None:
    parser = argparse.ArgumentParser()
    top.add_arguments(parser)
    out = io.StringIO()
    args = parser.parse_args(["--coordinator", served, "--queues", "--window", "1h"])
    assert await asyncio.to_thread(top.main, args, out) == 0
    assert out.getvalue() == (
        "3 queues over the last 1h; most GPU-hours allocated first\n"
        "QUEUE                 CPU-H USED      ALLOC   USE  GPU-H USED      ALLOC   USE\n"
        "research                    0.67       1.00   67%        0.20       0.40   50%\n"
        "team-b                      2.00       5.00   40%        0.10       0.20   50%\n"
        "team-c                      0.00       0.20    0%        0.00       0.00     -\n"
    )


async def test_an_unknown_window_is_400(served: str) -> None:
    with pytest.raises(top.debugask.AskError, match=r"expected one of 5m, 1h, 1d, got '2h'"):
        await asyncio.to_thread(top.debugask.ask, served, "/debug/patrol/queues", {"window": "2h"})
