"""One tile per node: the single definition of what ``/debug/nodes``, the ``/ui`` node map,
``stowage top`` and the per-node gauges in ``/metrics`` show about a node.

Every value is read where the coordinator already keeps it, so the view cannot disagree
with what the coordinator acts on:

* ``fullness`` — the largest of the shares the ``stowage.io/fullness`` annotation
  publishes (:func:`coordinator.kube.publisher.fullness_pct`: CPU, memory, GPU), as a
  fraction: the resource that runs out first says how full a node is;
* ``gpu_frag_milli`` — FGD's expected fragmentation F_n(M) of the node's free GPU
  (:mod:`coordinator.scoring.fragmentation`), with M the typical shapes of the pods the
  coordinator knows now (bound and pending); null on a node without GPUs or before any
  pod is known;
* ``contiguity`` — the share of the node's free memory that sits in blocks of 2 MiB or
  more, from its latest fresh report (the signal the contiguity filter reads);
* ``psi_cpu`` / ``psi_memory`` — PSI ``some`` in percent as scoring reads it (the rate
  over the agent's last interval, avg10 where it has none);
* ``throttled`` / ``throttle_reason`` — the colocation controller's best-effort quota;
* ``gpu_unhealthy`` / ``gpu_health`` — how many of the node's GPUs are not offered to new
  GPU pods and why (:mod:`coordinator.scoring.gpuhealth`, the filter's own judgement); 0
  and null for a healthy node or one without a fresh report;
* ``mig_free`` — on a node with MIG instances, how many of each profile are free of those
  it has (``3g.40gb 1/2, 1g.10gb 7/7``: its allocatable less what its bound pods request,
  :mod:`coordinator.scoring.mig.verdict`); null elsewhere;
* ``stale`` — no fresh signals (never reported, or silent longer than
  ``signals.report_ttl_s``); ``age_s`` — seconds since the latest report was received, on
  the coordinator's monotonic clock; ``reporting`` — an agent reported for the node since
  this replica started.

Nodes without any report appear too (from the Node objects), their signals null.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypedDict

from aiohttp import web

from coordinator.colocation.controller import RELEASED
from coordinator.kube.publisher import fullness_pct
from coordinator.live import LiveCluster
from coordinator.scoring import gpuhealth
from coordinator.scoring.fragmentation import Fragmentation, Shape, typical_shapes
from coordinator.scoring.mig import verdict as mig_verdict
from coordinator.scoring.mig.advertised import MigGpu

SHAPES_TTL_S: Final = 30.0
"""How long the typical shapes (M) stand before they are counted again over every known
pod: the mix of pod shapes changes slowly, and counting 10,000 pods costs more than the
rest of a 2,000-node view."""


class Tile(TypedDict):
    """One node as the view shows it (the JSON of ``/debug/nodes``; see the module)."""

    name: str
    gpu_model: str | None
    gpus: int
    gpu_free_milli: int
    fullness: float | None
    gpu_frag_milli: float | None
    contiguity: float | None
    psi_cpu: float | None
    psi_memory: float | None
    throttled: bool
    throttle_reason: str | None
    gpu_unhealthy: int
    gpu_health: str | None
    mig_free: str | None
    stale: bool
    age_s: float | None
    reporting: bool


class NodeView:
    """The tiles of every node the cluster state holds, now.

    Keeps FGD's fragmentation memo between calls while the typical shapes stay the same,
    so a scrape or a page refresh of an unchanged cluster costs a dictionary lookup per
    node, not a pass over the shapes; the shapes are counted again every
    :data:`SHAPES_TTL_S` (by the cluster's monotonic clock)."""

    def __init__(self, cluster: LiveCluster) -> None:
        self.cluster = cluster
        self._shapes: list[tuple[Shape, float]] = []
        self._shapes_at = -math.inf
        self._fragmentation = Fragmentation([])

    def tiles(self, names: Iterable[str] | None = None) -> list[Tile]:
        """The tiles of ``names`` (every node's by default), by name: a filtered view costs
        the nodes it shows, not the cluster."""
        cluster = self.cluster
        state = cluster.state
        if state is None:
            return []
        now = cluster.clock.monotonic()
        frag = self._measure(now)
        throttles = cluster.colocation.throttles
        health = cluster.settings.signals.gpu_health
        shown = sorted(cluster.specs if names is None else names)
        mig = self._mig_free(shown)
        tiles: list[Tile] = []
        for name in shown:
            i = state.index[name]
            spec = cluster.specs[name]
            signals = cluster.signals.get(name)
            age_s = cluster.freshness.age_s(name, now)
            throttle = throttles.get(name, RELEASED)
            throttled = throttle.quota_m is not None
            gpus = int(state.gpu_count[i])
            contiguity = None
            if signals is not None and signals.contiguous_2mib_b >= 0 and signals.free_mem_b > 0:
                contiguity = min(1.0, signals.contiguous_2mib_b / signals.free_mem_b)
            bad = {} if signals is None else gpuhealth.unhealthy(signals.gpu_faults, health)
            tiles.append(
                Tile(
                    name=name,
                    gpu_model=spec.gpu_model or None,
                    gpus=gpus,
                    gpu_free_milli=sum(state.gpu_tuple(i)),  # = gpu_idle_of(i), cheaper
                    fullness=max(fullness_pct(state, i).values()) / 100.0,
                    gpu_frag_milli=None
                    if frag is None or not gpus
                    else frag.node(int(state.cpu_free[i]), state.gpu_tuple(i), spec.gpu_model),
                    contiguity=contiguity,
                    psi_cpu=None if signals is None else _known(signals.cpu_pressure_pct),
                    psi_memory=None if signals is None else _known(signals.memory_pressure_pct),
                    throttled=throttled,
                    throttle_reason=throttle.reason if throttled else None,
                    gpu_unhealthy=len(bad),
                    gpu_health=gpuhealth.summary(bad) if bad else None,
                    mig_free=mig.get(name),
                    stale=signals is None,
                    age_s=age_s,
                    reporting=age_s is not None,
                )
            )
        return tiles

    def _mig_free(self, names: Iterable[str]) -> dict[str, str]:
        """``mig_free`` of the nodes of ``names`` that have MIG instances (by their
        allocatable, or the GPUs their report shows MIG-enabled); the pods are read once,
        and only when one of them does."""
        cluster = self.cluster
        mig: dict[str, tuple[Mapping[str, int], list[MigGpu]]] = {}
        for name in names:
            node, signals = cluster.node_facts.get(name), cluster.signals.get(name)
            gpus = [MigGpu(*g) for g in signals.mig_gpus] if signals is not None else []
            allocatable = node.allocatable if node is not None else {}
            if mig_verdict.has_mig(allocatable, gpus):
                mig[name] = (allocatable, gpus)
        if not mig:
            return {}
        bound: dict[str, list[Mapping[str, int]]] = {name: [] for name in mig}
        for facts in cluster.facts.values():
            if facts.node in bound:
                bound[facts.node].append(facts.scheduling.requests)
        out = {}
        for name, (allocatable, gpus) in mig.items():
            found = mig_verdict.explain({}, allocatable, mig_verdict.in_use(bound[name]), gpus)
            if found is not None:
                out[name] = mig_verdict.free_text(found)
        return out

    def _measure(self, now: float) -> Fragmentation | None:
        """F_n(M) for the pods known (at most :data:`SHAPES_TTL_S` ago); None while none is."""
        if now - self._shapes_at >= SHAPES_TTL_S or not self._shapes:
            shapes = typical_shapes(self.cluster.pods.values())
            self._shapes_at = now
            if shapes != self._shapes:
                self._shapes, self._fragmentation = shapes, Fragmentation(shapes)
        return self._fragmentation if self._shapes else None

    def document(self, tiles: list[Tile]) -> dict[str, Any]:
        """The JSON ``/debug/nodes`` answers with these tiles."""
        return {"generated_at": self.cluster.clock.wall(), "nodes": tiles}


NODE_VIEW = web.AppKey("node_view", NodeView)
"""The application's one :class:`NodeView` (``/debug/nodes`` and the gauges share it)."""


def _known(value: float) -> float | None:
    """NaN ("not measured") as null."""
    return None if math.isnan(value) else value
