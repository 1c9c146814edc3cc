"""``GET /debug/hints``: the latest autoscaling hints and deadlocks, for ``/ui`` and
``stowage top --hints`` (on the debug listener only, read-only).

The answer: when they were worked out (Unix seconds, ``null`` before the first round),
the node groups known, and per bounded queue (sorted) its hint — whether it should grow
(``scale``), the group and nodes, and per resource the gap, demand, room and standard
job (cpu in cores, the rest in units) with the pending pods counted and the reason — and
per deadlock its queue, what its pods ask for, how many and the reason. Bounded by the
cluster's queues and pending pods' shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from coordinator.autoscale.board import Board
from coordinator.autoscale.hints import Hints, amount

PATH = "/debug/hints"
HINTS = web.AppKey("hints", Board)


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, answer)


async def answer(request: web.Request) -> web.Response:
    """``GET /debug/hints``: see the module docstring."""
    board = request.app[HINTS]
    return web.json_response({"computed_at": board.computed_at, **document(board.latest)})


def document(found: Hints) -> dict[str, Any]:
    return {
        "groups": list(found.groups),
        "hints": [
            {
                "queue": h.queue,
                "source": h.source,
                "scale": h.scale,
                "group": h.group,
                "nodes": h.nodes,
                "pending": h.pending,
                "other_shapes": h.other_shapes,
                "unjudged": h.unjudged,
                "gap": _amounts(h.gap),
                "demand": _amounts(h.demand),
                "room": _amounts(h.room),
                "standard": _amounts(h.standard),
                "reason": h.reason,
            }
            for h in found.hints
        ],
        "deadlocks": [
            {
                "queue": d.queue,
                "wants": d.wants,
                "pods": d.pods,
                "example": d.example,
                "known": list(d.known),
                "reason": d.reason,
            }
            for d in found.deadlocks
        ],
    }


def _amounts(values: Mapping[str, int]) -> dict[str, float]:
    return {r: amount(r, v) for r, v in sorted(values.items())}
