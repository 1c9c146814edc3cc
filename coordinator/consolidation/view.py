"""``GET /debug/patrol?window=1h``: the patrol's windows as a heatmap's data, for
``stowage patrol`` and ``/ui``; ``GET /debug/patrol/queues?window=1h``: each queue's
CPU- and GPU-hours allocated and used over the window, for ``stowage top --queues`` (on
the debug listener only, read-only).

The answer: the window (its name, bucket width and count), the threshold, and per node
(sorted by name) the mean of each bucket oldest first (``null`` where unsampled), the
window's mean, peak and coverage, and whether it is a candidate now. The queues' answer:
the window and per queue (sorted) its four sums in hours, rounded to 0.001. An unknown
window is 400 naming the choices. Nodes and queues are the cluster's (queues: its last
day's), so either answer is bounded by its size.
"""

from __future__ import annotations

import math
from typing import Any

from aiohttp import web

from coordinator.consolidation.patrol import Patrol
from coordinator.consolidation.windows import BY_NAME

PATH = "/debug/patrol"
QUEUES_PATH = "/debug/patrol/queues"
PATROL = web.AppKey("patrol", Patrol)


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, patrol)
    app.router.add_get(QUEUES_PATH, queues)


async def patrol(request: web.Request) -> web.Response:
    """``GET /debug/patrol``: see the module docstring."""
    name = request.query.get("window", "1h")
    if name not in BY_NAME:
        return _unknown_window(name)
    return web.json_response(document(request.app[PATROL], name))


async def queues(request: web.Request) -> web.Response:
    """``GET /debug/patrol/queues``: see the module docstring."""
    name = request.query.get("window", "1h")
    window = BY_NAME.get(name)
    if window is None:
        return _unknown_window(name)
    watch = request.app[PATROL]
    rows = [
        {
            "queue": c.queue,
            "cpu_allocated_h": round(c.cpu_allocated_h, 3),
            "cpu_used_h": round(c.cpu_used_h, 3),
            "gpu_allocated_h": round(c.gpu_allocated_h, 3),
            "gpu_used_h": round(c.gpu_used_h, 3),
        }
        for c in watch.costs.over(window, watch.now())
    ]
    return web.json_response(
        {"window": {"name": window.name, "span_s": window.span_s}, "queues": rows}
    )


def _unknown_window(name: str) -> web.Response:
    choices = ", ".join(BY_NAME)
    shown = repr(name) if len(name) <= 32 else f"{len(name)} characters"
    return web.json_response(
        {"error": f"window: expected one of {choices}, got {shown}"}, status=400
    )


def document(watch: Patrol, name: str) -> dict[str, Any]:
    """The answer for window ``name`` (known)."""
    window = BY_NAME[name]
    candidates = {c.node for c in watch.candidates()}
    rows = []
    for node, heat in sorted(watch.heat(window, watch.nodes()).items()):
        summary = next(s for s in watch.summaries(node) if s.window is window)
        rows.append(
            {
                "node": node,
                "heat": [_number(v) for v in heat],
                "mean_pct": _number(summary.mean_pct),
                "peak_pct": _number(summary.peak_pct),
                "coverage": round(summary.coverage, 3),
                "candidate": node in candidates,
            }
        )
    return {
        "window": {"name": window.name, "bucket_s": window.bucket_s, "buckets": window.buckets},
        "threshold_pct": watch.settings.threshold_pct,
        "nodes": rows,
    }


def _number(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 1)
