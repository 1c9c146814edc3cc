"""``GET /debug/reservations``: the room held on each node now, as every replica's filter
holds it (:mod:`coordinator.live.nominations`) — the pending pods nominated to a node
(a preemption's or a migration's) and the moved pods' new homes reserved for their
replacements: on which node, for whom, made for what, until when, and which pending pod
it holds room for now (with what it requests) — none while no such pod is pending. On
the debug listener only, read-only, from this replica's Node watch.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from common import annotations as ann
from coordinator.live import LiveCluster
from coordinator.services import SERVICES

PATH: Final = "/debug/reservations"


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, reservations)


async def reservations(request: web.Request) -> web.Response:
    """``GET /debug/reservations``: see the module docstring."""
    return web.json_response(document(request.app[SERVICES].cluster))


def document(cluster: LiveCluster) -> dict[str, Any]:
    """Every node's nominations and reservations as JSON, by node then entry; an expired
    one (not yet tidied by the leader) holds nothing."""
    holders = dict(cluster.held_room())
    now = cluster.clock.wall()
    found: list[dict[str, Any]] = []
    for node in cluster.nominations.nodes():
        for entry in cluster.nominations.on(node):
            facts = holders.get(entry)
            found.append(
                {
                    "node": node,
                    "kind": "reservation" if entry.reservation else "nomination",
                    "pod": entry.pod,
                    ("controller_uid" if entry.reservation else "uid"): entry.uid,
                    "made_for": entry.made_for,
                    "until": ann.timestamp(entry.until),
                    "expired": entry.until <= now,
                    "holds_for": None
                    if facts is None
                    else {
                        "pod": facts.key,
                        "uid": facts.uid,
                        "cpu_m": facts.request.cpu_m,
                        "mem_b": facts.request.mem_b,
                        "gpus": facts.request.gpus,
                    },
                }
            )
    return {"held": found}
