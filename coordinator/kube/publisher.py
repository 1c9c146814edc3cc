"""Writes each node's Stowage summary into ``stowage.io/`` annotations — damped.

A node is patched only when a published number moved by more than ``change_pct`` points,
its state (fresh/stale) changed, or ``heartbeat_s`` passed; patches are JSON merge patches
on ``metadata.annotations`` and are rate-limited cluster-wide. Only the leader publishes,
and each patch first passes the lease's fence. A node whose patch is refused backs off on
its own; an API server in trouble pauses every patch.
Formats live in :mod:`common.annotations`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common import annotations as ann
from coordinator.colocation.controller import reclaimable_m
from coordinator.config import PublisherSettings
from coordinator.kube.client import KubeError, translate
from coordinator.kube.leader import Fence, LeaseLost
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.ratelimit import TokenBucket
from coordinator.scoring import gpuhealth
from coordinator.state.cluster import ClusterState

log = logging.getLogger(__name__)

TICK_S = 1.0


@dataclass(frozen=True, slots=True)
class Summary:
    """What is published for one node: annotation values and the numbers damping compares."""

    values: dict[str, str | None]
    numbers: dict[str, float]
    state: str


Extra = tuple[dict[str, str | None], dict[str, float]]
"""More annotations for one node, beside Stowage's own: values (None: remove the key) and
the numbers damping compares (crane-scheduler's, :mod:`coordinator.consolidation.crane`)."""


def with_extra(summary: Summary, extra: Extra) -> Summary:
    """``summary`` with ``extra``'s values and numbers added."""
    values, numbers = extra
    return Summary({**summary.values, **values}, {**summary.numbers, **numbers}, summary.state)


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
    cpu_cap, mem_cap = int(state.cpu_cap[i]), int(state.mem_cap[i])
    fullness = fullness_pct(state, i)
    numbers.update({f"fullness.{k}": v for k, v in fullness.items()})
    values: dict[str, str | None] = {
        ann.FULLNESS: ann.value({k: f"{v:.1f}" for k, v in fullness.items()}, now)
    }
    signals = cluster.signals.get(name)
    last = cluster.freshness.measured_at.get(name)
    if signals is None:
        since = f"no report since {ann.timestamp(last)}" if last is not None else "no report yet"
        values.update({ann.CONTIGUITY: None, ann.PRESSURE: None, ann.DIRECTIVES: None})
        _colocation(cluster, name, values, now)  # released: the node's agent hears nothing
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
    quota = _colocation(cluster, name, values, now)
    values[ann.DIRECTIVES] = ann.value({"be_cpu_quota": ann.millicores(quota)}, at)
    hub = cluster.colocation
    reclaimable = reclaimable_m(hub.facts.get(name), hub.pool_of(name))
    if reclaimable is not None:
        values[ann.BATCH_CPU] = ann.value({"reclaimable": ann.millicores(reclaimable)}, at)
        numbers["batch_cpu"] = _pct(reclaimable, cpu_cap)
    values[ann.STATE] = f"fresh;at={ann.timestamp(at)}"
    # A throttle that changes is written at once, however small the change: the state
    # carries it, and a changed state is always due. So is a change of unhealthy GPUs.
    status = "fresh" if quota is None else f"fresh/be={quota}"
    bad = gpuhealth.unhealthy(signals.gpu_faults, cluster.settings.signals.gpu_health, aged=False)
    if bad:
        gpus = "+".join(map(str, sorted(bad)))
        values[ann.GPU_HEALTH] = ann.value(
            {"unhealthy": gpus, "gpus": str(cluster.specs[name].gpus)}, at
        )
        values[ann.GPU_HEALTH_REASON] = ann.reason(gpuhealth.summary(bad))
        status += f"/gpu-unhealthy={gpus}"
    return Summary(values, numbers, status)


def fullness_pct(state: ClusterState, i: int) -> dict[str, float]:
    """How full node ``i`` is, per resource, 0-100 (``stowage.io/fullness``): what its
    pods hold of CPU, memory (of the true allocatable where the agent measured it) and,
    on a node with GPUs, GPU milli. The node view shows the same numbers."""
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
    return fullness


def _colocation(
    cluster: LiveCluster, name: str, values: dict[str, str | None], now: float
) -> int | None:
    """The node's best-effort CPU quota and its reason, as the controller has them now."""
    throttle = cluster.colocation.be_directive(name)
    values[ann.BE_CPU_QUOTA] = f"{ann.millicores(throttle.quota_m)};at={ann.timestamp(now)}"
    values[ann.BE_CPU_QUOTA_REASON] = ann.reason(throttle.reason)
    return throttle.quota_m


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


NODE_BACKOFF_S = 1.0
"""A node whose patch was refused waits this long, doubling with each refusal ..."""
NODE_BACKOFF_CAP_S = 300.0
"""... up to this (the default heartbeat): a node the API server does not know costs one
patch every five minutes, not one a tick."""
HOLD_S = 1.0
"""After the API server said it is overloaded or failing (429, 5xx, no answer), all
patching pauses this long, doubling ..."""
HOLD_CAP_S = 60.0
"""... up to this; a ``Retry-After`` the server sent is honoured instead, up to the same."""
PATCH_TIMEOUT_S = 10.0
"""A patch with no answer by then counts as failed (it may still land: merge patches of
the same values are idempotent, and the node stays due until one is confirmed)."""


def is_server_trouble(status: int) -> bool:
    """Whether a failed write says the API server (or the way to it) is in trouble, rather
    than that this node's patch was refused: every node would fail alike, so all pause."""
    return status in (0, 401, 429) or status >= 500


@dataclass
class _Refused:
    """A node whose last patch the API server refused (404 gone, 403 forbidden, 409, 422)."""

    failures: int
    retry_at: float  # monotonic


class Publisher:
    """Writes due nodes each tick within the patch budget, checking the lease's fence right
    before each write.

    Nodes whose patches were refused back off each on its own (doubling, capped, without
    jitter: they are tried only after every node in good standing, so even many of them
    retrying in the same tick cannot take the budget from a node that accepts patches).
    Server trouble (429/5xx/no answer) pauses all patching, for ``Retry-After`` when the
    server gave one."""

    def __init__(
        self,
        cluster: LiveCluster,
        patch: Callable[[str, dict[str, Any]], None],
        settings: PublisherSettings,
        metrics: CoordinatorMetrics,
        leader: asyncio.Event,
        fence: Fence,
        extra: Callable[[str, float], Extra] | None = None,
    ) -> None:
        """``extra(node, now)`` adds annotations of other schedulers' formats, written in
        the same patches, under the same damping and budget."""
        self._cluster = cluster
        self._extra = extra
        self._patch = patch
        self._settings = settings
        self._metrics = metrics
        self._leader = leader
        self._fence = fence
        self._published: dict[str, _Published] = {}
        self._refused: dict[str, _Refused] = {}
        self._bucket = TokenBucket(settings.max_patches_per_s, settings.max_patches_per_s)
        self._held_until = -math.inf
        self._holds = 0

    async def run(self) -> None:
        clock = self._cluster.clock
        while True:
            if not self._leader.is_set():
                # Another replica may lead meanwhile and write its own values: a new term
                # trusts nothing this one wrote before, so every node is written afresh.
                self._published.clear()
                await self._leader.wait()
            await self.publish_due(clock.wall(), clock.monotonic())
            self._metrics.publisher_ticks.inc()
            await asyncio.sleep(TICK_S)

    async def publish_due(self, now: float, now_mono: float) -> int:
        """Patch the nodes that are due, within the rate budget; return how many."""
        cluster = self._cluster
        self._bucket.refill(now_mono)
        if cluster.state is None or now_mono < self._held_until:
            return 0
        for gone in [n for n in self._published if n not in cluster.specs]:
            del self._published[gone]
        for gone in [n for n in self._refused if n not in cluster.specs]:
            del self._refused[gone]
        in_good_standing = [n for n in cluster.specs if n not in self._refused]
        retrying = [n for n, r in self._refused.items() if now_mono >= r.retry_at]
        patched = 0
        for name in in_good_standing + retrying:
            if not self._leader.is_set():
                break
            summary = summarize(cluster, name, now)
            if self._extra is not None:
                summary = with_extra(summary, self._extra(name, now))
            previous = self._published.get(name)
            if not due(summary, previous, now_mono, self._settings):
                continue
            body = _body(summary, previous)
            if ann.size_b(body) > ann.BUDGET_B:
                log.error("node %s: annotations over %d bytes, not written", name, ann.BUDGET_B)
                continue
            if not self._bucket.take():
                break
            try:
                await asyncio.to_thread(self._fenced_patch, name, body)
            except LeaseLost as e:
                log.warning("%s", e)
                break
            except Exception as e:
                self._metrics.patches.labels("error").inc()
                error = e if isinstance(e, KubeError) else translate(f"patch node {name}", e)
                if is_server_trouble(error.status):
                    self._hold(error, now_mono)
                    break
                self._refuse(name, error, now_mono)
                continue
            self._metrics.patches.labels("ok").inc()
            self._published[name] = _Published(summary, now_mono)
            self._refused.pop(name, None)
            self._holds = 0
            patched += 1
        return patched

    def _fenced_patch(self, name: str, body: dict[str, Any]) -> None:
        """The write, in the worker thread: the fence is checked as late as it can be."""
        self._fence.check(f"patch node {name}")
        self._patch(name, body)

    def _refuse(self, name: str, error: KubeError, now_mono: float) -> None:
        refused = self._refused.get(name)
        failures = 1 if refused is None else refused.failures + 1
        delay = min(NODE_BACKOFF_CAP_S, NODE_BACKOFF_S * 2 ** (failures - 1))
        self._refused[name] = _Refused(failures, now_mono + delay)
        if refused is None:  # once per node, not once per retry
            log.warning("%s; retrying with backoff (up to %gs)", error, NODE_BACKOFF_CAP_S)

    def _hold(self, error: KubeError, now_mono: float) -> None:
        self._holds += 1
        delay = min(HOLD_CAP_S, HOLD_S * 2 ** (self._holds - 1))
        if error.retry_after_s is not None:
            delay = min(HOLD_CAP_S, error.retry_after_s)
        self._held_until = now_mono + delay
        log.warning("%s; pausing all patches for %gs", error, delay)


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
        core.patch_node(
            name,
            body,
            _content_type="application/merge-patch+json",
            _request_timeout=PATCH_TIMEOUT_S,
        )

    return patch
