"""``GET /debug/explain?pod=NS/NAME&node=NODE``: why a node would or would not get a pod.

Answers the filter verdict and the policy's score broken into its components (for
``stowage``: fragmentation and stranding before and after, the live-signal points),
whether the node's signals are fresh, and its latest report: the ``measured_at`` its
agent wrote (shown, not trusted) and how many seconds ago this replica received it (what
freshness is judged by). Read-only; safe on every replica.

``GET /debug/colocation?node=NODE``: why the node's best-effort pods are (or are not)
throttled right now — the quota and its reason, the node's pool and thresholds, how long
until the next tightening or relaxing step if the condition holds, the facts of its latest
report (LS stall and where it came from, LS and BE use, allocatable) and what its agent
says it applied. Without ``node``: every node that is throttled now. On a follower it
shows the follower's own (warm) decisions, and says it is not the one agents follow.

``GET /debug/plan?pod=NS/NAME`` (or ``?node=NODE`` for memory pressure): what the
eviction planner would evict now and why, without acting — the plan (node, victims with
the reason each is in it, the cost key, whether approval is needed) or the refusal.
``stowage plan --explain`` prints it. The cooldowns applied are those every replica
shares (:mod:`coordinator.live.cooldowns`: the rounds that really evicted); the leader's
dry-run preview keeps its own, which the answer's note says are not applied.

``GET /debug/nodes[?filter=SUBSTRING][&limit=N]``: every node's tile
(:mod:`coordinator.nodeview`), by name — the data of ``/ui`` and ``stowage top``. The
filter keeps nodes whose name or GPU model contains it (any case).

Like every ``/debug`` route, these are read-only and unauthenticated, and served on the
debug listener only (``server.debug_listen``, :func:`coordinator.app.make_debug_app`),
which is bound to 127.0.0.1 by default: they name pods, priorities and plans in every
namespace. Reach them with ``kubectl port-forward`` (the caller's own Kubernetes
credentials in front of them).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from coordinator.eviction.answers import Deadline, Plan, Refusal
from coordinator.eviction.plan import plan_preemption, plan_pressure
from coordinator.eviction.view import shared_view
from coordinator.live.cooldowns import APPLIED_NOTE
from coordinator.nodeview import NODE_VIEW
from coordinator.services import SERVICES


async def explain(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    pod_key = request.query.get("pod", "")
    node = request.query.get("node", "")
    if not pod_key or not node:
        return web.json_response({"error": "give ?pod=NAMESPACE/NAME&node=NODE"}, status=400)
    pod = services.cluster.pods.get(pod_key if "/" in pod_key else f"default/{pod_key}")
    if pod is None:
        return web.json_response({"error": f"pod {pod_key} is not known"}, status=404)
    try:
        answer = services.cluster.explain(pod, node)
    except KeyError:
        return web.json_response({"error": f"node {node} is not known"}, status=404)
    return web.json_response({"pod": pod_key, **answer})


async def evictions(request: web.Request) -> web.Response:
    """``GET /debug/evictions``: the eviction executor's latest decisions, oldest first,
    one line each (time, trigger, pending pod or node, decision: reason [victim=outcome])."""
    lines = request.app[SERVICES].evictions.lines()
    return web.Response(text="".join(f"{line}\n" for line in lines))


async def colocation(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    cluster = services.cluster
    hub = cluster.colocation
    now = services.clock.monotonic()
    leading = services.leader.is_set() or not hub.elected

    def explain(node: str) -> dict[str, Any]:
        return hub.explain(node, now, cluster.freshness.verdict(node, now).age_s)

    node = request.query.get("node", "")
    if not node:
        throttled = sorted(n for n, t in hub.throttles.items() if t.quota_m is not None)
        return web.json_response({"leading": leading, "throttled": [explain(n) for n in throttled]})
    if node not in cluster.specs:
        return web.json_response({"error": f"node {node} is not known"}, status=404)
    return web.json_response({"leading": leading, **explain(node)})


MAX_NODES_LIMIT = 100_000
MAX_FILTER_CHARS = 253  # the longest node name Kubernetes allows


async def nodes(request: web.Request) -> web.Response:
    """``GET /debug/nodes``: see the module docstring."""
    view = request.app[NODE_VIEW]
    wanted = request.query.get("filter", "")
    raw_limit = request.query.get("limit")
    if len(wanted) > MAX_FILTER_CHARS:
        return web.json_response(
            {"error": f"filter: at most {MAX_FILTER_CHARS} characters"}, status=400
        )
    limit = None
    if raw_limit is not None:
        limit = _whole_number(raw_limit, MAX_NODES_LIMIT)
        if limit is None:
            got = repr(raw_limit) if len(raw_limit) <= 32 else f"{len(raw_limit)} characters"
            error = f"limit: expected a whole number 1..{MAX_NODES_LIMIT}, got {got}"
            return web.json_response({"error": error}, status=400)
    specs = view.cluster.specs
    needle = wanted.casefold()
    names = sorted(
        name
        for name, spec in specs.items()
        if needle in name.casefold() or needle in spec.gpu_model.casefold()
    )
    return web.json_response(view.document(view.tiles(names[:limit])))


def _whole_number(text: str, most: int) -> int | None:
    """``text`` as a whole number 1..``most``, or None. ASCII digits only, and no more of
    them than ``most`` has: ``int()`` takes other scripts' digits too, and raises on a
    string of more than 4,300 digits."""
    if not (text.isascii() and text.isdecimal()) or len(text) > len(str(most)):
        return None
    value = int(text)
    return value if 1 <= value <= most else None


async def plan(request: web.Request) -> web.Response:
    """``GET /debug/plan``: see the module docstring."""
    services = request.app[SERVICES]
    cluster = services.cluster
    settings = services.settings.evictions
    pod_key = request.query.get("pod", "")
    node = request.query.get("node", "")
    if bool(pod_key) == bool(node):
        return web.json_response(
            {"error": "give ?pod=NAMESPACE/NAME (preemption) or ?node=NODE (pressure)"},
            status=400,
        )
    now = services.clock.wall()
    view = shared_view(cluster, now)
    if view is None:
        return web.json_response({"error": "no nodes known yet"}, status=404)
    outcome: Plan | Refusal
    if pod_key:
        facts = cluster.facts_named(pod_key)
        if facts is None:
            return web.json_response({"error": f"pod {pod_key} is not known"}, status=404)
        key = facts.key
        if facts.node is not None:
            return web.json_response(
                {"error": f"pod {key} runs on {facts.node}: only pending pods preempt"},
                status=400,
            )
        mono = services.clock.monotonic
        deadline = Deadline(mono, mono() + settings.plan_deadline_s)
        subject, outcome = key, plan_preemption(view, facts, settings, now, deadline)
    else:
        if node not in cluster.specs:
            return web.json_response({"error": f"node {node} is not known"}, status=404)
        subject, outcome = node, plan_pressure(view, node, settings, now)
    answer: dict[str, Any] = {
        "subject": subject,
        "trigger": "preemption" if pod_key else "pressure",
        "dry_run": not settings.enabled,
        "note": APPLIED_NOTE,
    }
    if isinstance(outcome, Refusal):
        answer["refusal"] = outcome.reason
    else:
        answer["plan"] = plan_json(outcome)
    return web.json_response(answer)


def plan_json(p: Plan) -> dict[str, Any]:
    """A plan as JSON, levels by name."""
    return {
        "trigger": p.trigger,
        "node": p.node,
        "preemptor": p.preemptor,
        "queue": p.queue,
        "reason": p.reason,
        "needs_approval": p.needs_approval,
        "cost": dict(
            zip(("victims", "levels", "work_lost_s", "gang_dragged"), p.cost, strict=True)
        ),
        "victims": [
            {
                "uid": v.uid,
                "pod": f"{v.namespace}/{v.name}",
                "node": v.node,
                "level": v.level.name.lower(),
                "priority": v.priority,
                "queue": v.queue,
                "checkpoint_age_s": v.checkpoint_age_s,
                "gang": v.gang,
                "reason": v.reason,
            }
            for v in p.victims
        ],
    }


def add_routes(app: web.Application) -> None:
    app.router.add_get("/debug/plan", plan)
    app.router.add_get("/debug/explain", explain)
    app.router.add_get("/debug/colocation", colocation)
    app.router.add_get("/debug/evictions", evictions)
    app.router.add_get("/debug/nodes", nodes)
