"""Writes each node's Stowage summary into ``stowage.io/`` annotations — damped.

A node is patched only when a published number moved by more than ``change_pct`` points,
its state (fresh/stale) changed, or ``heartbeat_s`` passed; patches are JSON merge patches
on ``metadata.annotations`` and are rate-limited cluster-wide. Only the leader publishes.
Formats live in :mod:`common.annotations`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common import annotations as ann
from coordinator.config import PublisherSettings
from coordinator.kube.client import translate
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics

log = logging.getLogger(__name__)

TICK_S = 1.0


@dataclass(frozen=True, slots=True)
class Summary:
    """What is published for one node: annotation values and the numbers damping compares."""

    values: dict[str, str | None]
    numbers: dict[str, float]
    state: str


@dataclass
class _Published:
    summary: Summary
    at: float  # monotonic


def summarize(cluster: LiveCluster, name: str, now: float) -> Summary:
    """The annotations node ``name`` should carry now."""
    state = cluster.state
    assert state is not None and name in state.index
    i = state.index[name]
    numbers: dict[str, float] = {}
    cpu_cap, gpu_cap = int(state.cpu_cap[i]), int(state.gpu_count[i]) * 1000
    mem_cap = int(state.mem_cap[i])
    true_mem = int(state.true_allocatable_mem_b[i])
    mem_base = true_mem if true_mem > 0 else mem_cap
    fullness = {
        "cpu": _pct(cpu_cap - int(state.cpu_free[i]), cpu_cap),
        "memory": _pct(mem_cap - int(state.mem_free[i]), mem_base),
    }
    if gpu_cap:
        fullness["gpu"] = _pct(gpu_cap - state.gpu_idle_of(i), gpu_cap)
    numbers.update({f"fullness.{k}": v for k, v in fullness.items()})
    values: dict[str, str | None] = {
        ann.FULLNESS: ann.value({k: f"{v:.1f}" for k, v in fullness.items()}, now)
    }
    signals = cluster.signals.get(name)
    last = cluster.last_report_at.get(name)
    if signals is None:
        since = f"no report since {ann.timestamp(last)}" if last is not None else "no report yet"
        values.update({ann.CONTIGUITY: None, ann.PRESSURE: None, ann.DIRECTIVES: None})
        values[ann.STATE] = f"stale: {since};at={ann.timestamp(now)}"
        return Summary(values, numbers, "stale")
    at = signals.measured_at
    if signals.contiguous_2mib_b >= 0:
        values[ann.CONTIGUITY] = ann.value(
            {"free_2mib": ann.gibibytes(signals.contiguous_2mib_b)}, at
        )
        numbers["contiguity"] = _pct(signals.contiguous_2mib_b, mem_cap)
    pressure = {
        k: v
        for k, v in (("cpu", signals.cpu_pressure_pct), ("memory", signals.memory_pressure_pct))
        if not math.isnan(v)
    }
    if pressure:
        values[ann.PRESSURE] = ann.value({k: f"{v:.1f}" for k, v in pressure.items()}, at)
        numbers.update({f"pressure.{k}": v for k, v in pressure.items()})
    values[ann.DIRECTIVES] = ann.value({"be_cpu_quota": "none"}, at)
    values[ann.STATE] = f"fresh;at={ann.timestamp(at)}"
    return Summary(values, numbers, "fresh")


def due(
    new: Summary, last: _Published | None, now_mono: float, settings: PublisherSettings
) -> bool:
    """Whether a node needs a patch: first time, state or keys changed, a number moved
    more than ``change_pct`` points, or the heartbeat is due."""
    if last is None or now_mono - last.at >= settings.heartbeat_s:
        return True
    old = last.summary
    if new.state != old.state or new.numbers.keys() != old.numbers.keys():
        return True
    return any(abs(v - old.numbers[k]) > settings.change_pct for k, v in new.numbers.items())


class Publisher:
    def __init__(
        self,
        cluster: LiveCluster,
        patch: Callable[[str, dict[str, Any]], None],
        settings: PublisherSettings,
        metrics: CoordinatorMetrics,
        leader: asyncio.Event,
    ) -> None:
        self._cluster = cluster
        self._patch = patch
        self._settings = settings
        self._metrics = metrics
        self._leader = leader
        self._published: dict[str, _Published] = {}
        self._tokens = settings.max_patches_per_s

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            if not self._leader.is_set():
                # Another replica may lead meanwhile and write its own values: a new term
                # trusts nothing this one wrote before, so every node is written afresh.
                self._published.clear()
                await self._leader.wait()
            now_mono = time.monotonic()
            self._tokens = min(
                self._settings.max_patches_per_s,
                self._tokens + (now_mono - last) * self._settings.max_patches_per_s,
            )
            last = now_mono
            await self.publish_due(self._cluster.clock.wall(), now_mono)
            await asyncio.sleep(TICK_S)

    async def publish_due(self, now: float, now_mono: float) -> int:
        """Patch the nodes that are due, within the rate budget; return how many."""
        cluster = self._cluster
        if cluster.state is None:
            return 0
        for name in list(self._published):
            if name not in cluster.specs:
                del self._published[name]
        patched = 0
        for name in list(cluster.specs):
            if self._tokens < 1 or not self._leader.is_set():
                break
            summary = summarize(cluster, name, now)
            previous = self._published.get(name)
            if not due(summary, previous, now_mono, self._settings):
                continue
            body = _body(summary, previous)
            if ann.size_b(body) > ann.BUDGET_B:
                log.error("node %s: annotations over %d bytes, not written", name, ann.BUDGET_B)
                continue
            self._tokens -= 1
            try:
                await asyncio.to_thread(self._patch, name, body)
            except Exception as e:
                self._metrics.patches.labels("error").inc()
                log.warning("%s", translate(f"patch node {name}", e))
                continue
            self._metrics.patches.labels("ok").inc()
            self._published[name] = _Published(summary, now_mono)
            patched += 1
        return patched


def _body(summary: Summary, previous: _Published | None) -> dict[str, Any]:
    """The merge patch: new values, and null for keys no longer published."""
    values = dict(summary.values)
    if previous is None:
        return {"metadata": {"annotations": values}}
    for key, old in previous.summary.values.items():
        if old is not None and values.get(key) is None:
            values[key] = None
    return {"metadata": {"annotations": values}}


def _pct(part: float, whole: float) -> float:
    return 0.0 if whole <= 0 else max(0.0, min(100.0, 100.0 * part / whole))


def merge_patcher(api_client: Any) -> Callable[[str, dict[str, Any]], None]:
    """Patch a Node with a JSON merge patch through the real client (null deletes a key)."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)

    def patch(name: str, body: dict[str, Any]) -> None:
        core.patch_node(name, body, _content_type="application/merge-patch+json")

    return patch
