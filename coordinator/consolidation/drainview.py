"""``GET /debug/drains``: the drain plan as the leader would make it now — the nodes it
frees, each pod's destination, and why every other candidate is not drainable — for
``stowage plan --consolidate`` (on the debug listener only, read-only: it plans and
acts on nothing).

Candidates are this replica's patrol's latest (every replica judges its own windows);
the cooldowns applied are those every replica shares (:mod:`coordinator.live.cooldowns`:
the rounds that really evicted).
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from coordinator.consolidation.drain import DrainPlan, plan_drains
from coordinator.consolidation.drainer import candidates
from coordinator.consolidation.view import PATROL
from coordinator.eviction.answers import Deadline
from coordinator.eviction.view import shared_view
from coordinator.live.cooldowns import APPLIED_NOTE
from coordinator.services import SERVICES

PATH: Final = "/debug/drains"


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, drains)


async def drains(request: web.Request) -> web.Response:
    """``GET /debug/drains``: see the module docstring."""
    services = request.app[SERVICES]
    settings = services.settings
    cluster = services.cluster
    view = shared_view(cluster, services.clock.wall())
    if view is None:
        return web.json_response({"error": "no nodes known yet"}, status=404)
    mono = services.clock.monotonic
    deadline = Deadline(mono, mono() + settings.evictions.cycle_budget_s)
    names = candidates(request.app[PATROL])
    plan = plan_drains(
        view, names, settings.drain, settings.evictions, services.clock.wall(), deadline
    )
    answer = document(plan)
    answer.update(
        enabled=settings.drain.enabled,
        dry_run=not settings.evictions.enabled,
        candidates=names,
        note=APPLIED_NOTE,
    )
    return web.json_response(answer)


def document(plan: DrainPlan) -> dict[str, Any]:
    """A drain plan as JSON."""
    return {
        "drains": [
            {
                "node": d.node,
                "group": d.group,
                "draining": d.draining,
                "moves": [
                    {"pod": m.pod, "uid": m.uid, "destination": m.destination} for m in d.moves
                ],
                "reason": d.plan.reason if d.plan else f"nothing to move off {d.node}",
            }
            for d in plan.drains
        ],
        "blocked": [
            {"node": b.node, "draining": b.draining, "reason": b.reason} for b in plan.blocked
        ],
        "cut": plan.cut,
    }
