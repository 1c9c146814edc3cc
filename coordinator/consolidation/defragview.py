"""``GET /debug/defrag``: the migrations the leader would plan now — for each pending pod
of ``defrag.min_gpus`` GPUs or more (or the one ``?pod=NAMESPACE/NAME`` names), the node
it would be given and where each moved pod would go, or why it gets no migration — for
``stowage plan --defrag`` (on the debug listener only, read-only: it plans and acts on
nothing).

Planned over this replica's live view as the leader's round plans
(:func:`coordinator.consolidation.defragger.plan_round`), without the nominations held
first; the cooldowns applied are those every replica shares
(:mod:`coordinator.live.cooldowns`: the rounds that really evicted).
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from coordinator.consolidation.defrag import Migration
from coordinator.consolidation.defragger import Round, plan_round, waiting
from coordinator.eviction.view import shared_view
from coordinator.live.cooldowns import APPLIED_NOTE
from coordinator.services import SERVICES

PATH: Final = "/debug/defrag"


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, migrations)


async def migrations(request: web.Request) -> web.Response:
    """``GET /debug/defrag``: see the module docstring."""
    services = request.app[SERVICES]
    settings = services.settings
    cluster = services.cluster
    view = shared_view(cluster, services.clock.wall())
    if view is None:
        return web.json_response({"error": "no nodes known yet"}, status=404)
    pods = waiting(cluster, settings.defrag)
    asked = request.query.get("pod", "")
    if asked:
        facts = cluster.facts_named(asked)
        if facts is None:
            return web.json_response({"error": f"pod {asked} is not known"}, status=404)
        if facts.node is not None:
            return web.json_response(
                {"error": f"pod {facts.key} runs on {facts.node}: only pending pods are placed"},
                status=400,
            )
        pods = [facts]
    planned = plan_round(
        view, pods, settings.defrag, settings.evictions, services.clock.wall(),
        services.clock.monotonic,
    )  # fmt: skip
    answer = document(planned)
    answer.update(
        enabled=settings.defrag.enabled,
        dry_run=not settings.evictions.enabled,
        note=APPLIED_NOTE,
    )
    return web.json_response(answer)


def document(planned: Round) -> dict[str, Any]:
    """A round of migrations as JSON."""
    found: list[dict[str, Any]] = []
    refused: list[dict[str, str]] = []
    for entry in planned.answers:
        answer = entry.answer
        if not isinstance(answer, Migration):
            refused.append({"pod": entry.pod, "reason": answer.reason})
            continue
        plan = answer.plan
        origin = {v.uid: v.node for v in plan.victims}
        found.append(
            {
                "pod": entry.pod,
                "node": answer.node,
                "moves": [
                    {
                        "pod": m.pod,
                        "uid": m.uid,
                        "from": origin[m.uid],
                        "destination": m.destination,
                    }
                    for m in answer.moves
                ],
                "reason": plan.reason,
                "needs_approval": plan.needs_approval,
                "cut": plan.cut,
                "cost": dict(
                    zip(("moved", "levels", "work_lost_s", "gang_dragged"), plan.cost, strict=True)
                ),
            }
        )
    return {"migrations": found, "refused": refused, "cut": planned.cut}
