"""Volcano's ``extender`` plugin: ``POST /volcano/predicate`` and ``/volcano/prioritize``
(``extender.urlPrefix: http://…/volcano``, ``extender.predicateVerb: predicate``,
``extender.prioritizeVerb: prioritize``), over the same decisions as kube-scheduler's
extender.

* **Predicate** is called once per (task, node): ``{"status": "", "code": 0}`` when the
  node can take the task, else the reason with code 2 (Unschedulable: evicting could
  help) or 3 (UnschedulableAndUnresolvable). Volcano turns a non-empty message with code
  0 into an error, so a refusal never carries code 0.
* **Prioritize** scores every offered node on **0–100**, our 0–10 score × 10. Volcano adds
  the extender's ``nodeScore`` *raw* to the other plugins' scores, and ``binpack`` gives
  0–100 × ``binpack.weight``; on 0–10 we would be lost next to it. At × 10 the node we
  would pick weighs as much as a weight-1 binpack's full score. Like kube-scheduler's
  prioritize, the node scored highest then counts the task as assumed — for Volcano's
  calls only (:meth:`coordinator.live.LiveCluster.counting_volcano`): the plugin sends no
  credentials, so what anyone tells ``/volcano/*`` must not change what kube-scheduler,
  perhaps behind mutual TLS, is told.

The task is judged from its embedded ``Pod`` when Volcano sends one (annotations, QoS and
all), else from ``Resreq`` (see :func:`.volcanowire.decode_predicate_args`).
A ``NodeInfo`` that carries its ``Node`` has it checked (400 for one the cluster could not
take), but, as for kube-scheduler, nodes are judged as the Node watch has them: a request
never changes them, and a node the watch does not have passes and scores 0. As for
kube-scheduler, answers before the caches are synced use whatever is known (deploy with
``extender.ignorable: true``).
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

from coordinator.extender import volcanowire
from coordinator.extender.handling import (
    MIB,
    check_nodes,
    endpoint,
    json_reply,
    priority_of,
    read_json,
    request_of,
)
from coordinator.live import MAX_EXTENDER_SCORE
from coordinator.services import Services

PREFIX: Final = "/volcano"
MAX_BODY_B: Final = 32 * MIB
"""A prioritize call carries every candidate ``NodeInfo``, each with its Node and the
``TaskInfo`` (and Pod) of every task on it."""
MAX_NODE_SCORE: Final = 100
"""Volcano's ``fwk.MaxNodeScore``: the scale binpack and the other plugins score on."""
SCORE_SCALE: Final = MAX_NODE_SCORE // MAX_EXTENDER_SCORE
"""Our 0–10 to Volcano's 0–100."""


@endpoint("volcano-predicate")
async def predicate(request: web.Request, services: Services) -> web.Response:
    task, node = volcanowire.decode_predicate_args(await read_json(request, MAX_BODY_B))
    pod = request_of(task.pod, services.settings)
    check_nodes(
        "node", [("node.Node", node.node)], services.settings.extender.max_nodes_per_request
    )
    cluster = services.cluster
    with cluster.counting_volcano(), cluster.nominated_room(task.uid, priority_of(task.pod)):
        result = cluster.filter(pod, [node.name])
    if node.name in result.unresolvable:
        reply = volcanowire.predicate_reply(
            False, result.unresolvable[node.name], unresolvable=True
        )
    elif node.name in result.failed:
        reply = volcanowire.predicate_reply(False, result.failed[node.name])
    else:
        reply = volcanowire.predicate_reply(True)
    return json_reply(reply)


@endpoint("volcano-prioritize")
async def prioritize(request: web.Request, services: Services) -> web.Response:
    task, nodes = volcanowire.decode_volcano_prioritize_args(await read_json(request, MAX_BODY_B))
    pod = request_of(task.pod, services.settings)
    most = services.settings.extender.max_nodes_per_request
    check_nodes("nodes", [(f"nodes[{i}].Node", n.node) for i, n in enumerate(nodes)], most)
    names = [n.name for n in nodes]
    cluster = services.cluster
    with cluster.counting_volcano(), cluster.nominated_room(task.uid, priority_of(task.pod)):
        scores = cluster.prioritize(pod, names)
        chosen = [name for name, score in scores.items() if score == MAX_EXTENDER_SCORE]
        if chosen and task.uid:
            services.cluster.assume(task.uid, pod, chosen[0])
    return json_reply(volcanowire.node_scores((name, scores[name] * SCORE_SCALE) for name in names))


def add_routes(app: web.Application) -> None:
    app.router.add_post(f"{PREFIX}/predicate", predicate)
    app.router.add_post(f"{PREFIX}/prioritize", prioritize)
