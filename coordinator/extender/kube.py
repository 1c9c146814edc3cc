"""kube-scheduler's HTTP extender: ``POST /scheduler/filter``, ``/scheduler/prioritize``,
``/scheduler/preempt`` (``urlPrefix: https://…/scheduler`` with the verbs ``filter``,
``prioritize``, ``preempt``).

* **Filter** answers which of the offered nodes can take the pod, and why the others
  cannot, in ``kubectl describe pod`` words: ``FailedNodes`` where evicting pods could
  help (preemption may still try them), ``FailedAndUnresolvableNodes`` where it could not.
* **Prioritize** answers an integer 0–10 for every offered node (kube-scheduler adds
  score × weight × 10): 10 for the node the policy would pick, the rest scaled below.
  That node then counts the pod as *assumed* (until the pod watch says where it was
  bound, or ``kube.assumed_ttl_s``), so a burst of pods does not pile onto one node
  between two watch events. When the filter leaves a single node, kube-scheduler binds
  there without asking prioritize, so the filter assumes the pod there itself (the real
  kube-scheduler, left unassumed, had the next pods' filter see room that was gone and
  overcommit GPU shares). A pod asked about again (a retry) first loses its own earlier
  assumption, which must not stand in its way. Where nothing but Stowage's score would
  tell the passing nodes apart, the filter answers only the node Stowage ranks first
  (:mod:`coordinator.extender.picking`): one call per pod instead of two.
* **Preempt** answers from the eviction planner: per candidate node, the cheapest subset
  of the victims kube-scheduler proposes that the rules allow (levels, budgets, no pod
  checkpointing now, no gang broken beyond the proposal) and after whose eviction both
  Stowage's own filter and kube-scheduler's filters (:mod:`coordinator.feasibility`)
  pass the pod there; a node without one is dropped, never narrowed below what the pod
  needs. A node Stowage does not know is dropped too (its victims are never passed on
  unchecked), and so is every node while the pod's queue cools down, needs approval for
  its plans, or the pod may not preempt (said once per reason per cooldown in
  ``/debug/evictions``: :mod:`coordinator.extender.refusals`). The cooldowns are the ones
  the leader shares with every replica (:mod:`coordinator.live.cooldowns`): those of the
  rounds that really evicted. Only well-formed entries are answered, in the Meta form.

Both node modes work, and both are judged against the nodes of the Node watch: a name
it does not have passes filter (nothing known against it) and scores 0. With
``nodeCacheCapable: true`` only names arrive. With ``nodeCacheCapable: false`` whole Node
objects arrive; they are checked (400 for one the cluster could not take) but are the
caller's view only and never change the stored nodes (see
:func:`coordinator.extender.handling.check_nodes`); the passing Node objects go back as
a NodeList. A call offers at most ``extender.max_nodes_per_request`` nodes (400 above).

**Before the caches are synced** (``services.synced`` unset) filter and prioritize still
answer from whatever is known, rather than refusing. The extender is deployed
``ignorable``, so refusing would only make kube-scheduler log an error and go on without
us. What we answer early errs towards passing: pods not yet listed only make nodes look
emptier, and nodes not yet listed pass; kube-scheduler's own fit checks ran before us.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress
from typing import Any, Final

import numpy as np
from aiohttp import web

from coordinator.eviction.answers import Deadline, Refusal
from coordinator.eviction.plan import narrow_victims
from coordinator.eviction.view import shared_view
from coordinator.extender import kubewire
from coordinator.extender.handling import (
    MIB,
    check_count,
    check_nodes,
    endpoint,
    json_bytes_reply,
    json_reply,
    priority_of,
    read_body,
    read_json,
    request_of,
)
from coordinator.extender.picking import pick
from coordinator.extender.refusals import VerbRefusals
from coordinator.live import MAX_EXTENDER_SCORE
from coordinator.services import Services
from coordinator.state.podfacts import controller_uid, pod_facts
from coordinator.state.podrequest import PodRequest

PREFIX: Final = "/scheduler"
MAX_BODY_B: Final = 16 * MIB
"""Nodes mode sends every candidate Node (a few KiB each; 100–1,000 per call in large
clusters, where kube-scheduler stops after ``numFeasibleNodesToFind``)."""
ARGS_READER: Final = web.AppKey("extender_args_reader", kubewire.ExtenderArgsReader)
"""This app's reader of filter and prioritize requests (it remembers the last names)."""
HOST_PRIORITIES: Final = web.AppKey("host_priorities", kubewire.HostPriorityWriter)
"""This app's writer of prioritize replies (it remembers the last list of names)."""
REFUSALS: Final = web.AppKey("preempt_refusals", VerbRefusals)
"""This app's memory of the preempt verb's refusals, told once per reason per cooldown."""


@endpoint("filter")
async def filter_nodes(request: web.Request, services: Services) -> web.Response:
    args, pod = await _read_args(request, services)
    uid = _uid(args.pod)
    if uid:
        services.cluster.unassume(uid)  # asked again: its earlier guess no longer holds
    with services.cluster.nominated_room(uid, priority_of(args.pod)):
        result = services.cluster.filter(pod, args.names)
        home = _reserved(services, args.pod, uid)
        if home is not None and home in result.passing:
            chosen: str | None = home  # a moved pod's replacement: where its plan put it
        else:
            chosen = pick(services.cluster, args.pod, pod, args.names, result) if uid else None
    if chosen is not None:
        result.passing = [chosen]  # Stowage's first choice alone (see picking)
    if len(result.passing) == 1 and uid:
        services.cluster.assume(uid, pod, result.passing[0])  # no prioritize will follow
    if args.nodes is not None:
        passing = set(result.passing)
        items = [node for node, name in zip(args.nodes, args.names, strict=True) if name in passing]
        return json_reply(kubewire.filter_reply([], result.failed, result.unresolvable, items))
    if chosen is not None or len(result.passing) < 2:
        names = result.passing
    elif len(result.passing) == len(args.names):  # one entry per name offered that passes
        names = args.names
    else:
        assert result.passed is not None
        names = list(compress(args.names, result.passed.tolist()))  # in the order offered
    return json_reply(kubewire.filter_reply(names, result.failed, result.unresolvable))


@endpoint("prioritize")
async def prioritize_nodes(request: web.Request, services: Services) -> web.Response:
    args, pod = await _read_args(request, services)
    uid = _uid(args.pod)
    if uid:
        services.cluster.unassume(uid)
    with services.cluster.nominated_room(uid, priority_of(args.pod)):
        scores = services.cluster.prioritize_each(pod, args.names)
    home = _reserved(services, args.pod, uid)
    if home is not None and home in args.names:  # a replacement: its reserved home alone
        scores = np.where(np.array(args.names) == home, MAX_EXTENDER_SCORE, 0)
    top = np.flatnonzero(scores == MAX_EXTENDER_SCORE)
    reply = json_bytes_reply(request.app[HOST_PRIORITIES].write(args.names, scores))
    if len(top) and uid:
        services.cluster.assume(uid, pod, args.names[int(top[0])])
    return reply


def _reserved(services: Services, pod: Mapping[str, Any], uid: str) -> str | None:
    """The node reserved for ``pod`` as a moved pod's replacement
    (:meth:`coordinator.live.LiveCluster.reserved_node`), by its namespace and its
    controller's uid, never its labels; None for a pod without a uid."""
    if not uid:
        return None
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    return services.cluster.reserved_node(uid, namespace, controller_uid(pod))


def _uid(pod: Mapping[str, Any]) -> str:
    """The pod's uid, or "" when it has none (nothing is assumed for such a pod)."""
    uid = (pod.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) else ""


async def _read_args(
    request: web.Request, services: Services
) -> tuple[kubewire.ExtenderArgs, PodRequest]:
    """A filter or prioritize request and its pod, checked whole (in Nodes mode the
    offered Node objects too, which are used for nothing else)."""
    args = request.app[ARGS_READER].read(await read_body(request, MAX_BODY_B))
    pod = request_of(args.pod, services.settings)
    most = services.settings.extender.max_nodes_per_request
    if args.nodes is not None:
        placed = [(f"Nodes.items[{i}]", node) for i, node in enumerate(args.nodes)]
        check_nodes("Nodes.items", placed, most)
    else:
        check_count("NodeNames", len(args.names), most)
    return args, pod


@endpoint("preempt")
async def preempt(request: web.Request, services: Services) -> web.Response:
    """kube-scheduler's candidates narrowed by the planner (see above), as UIDs."""
    args = kubewire.decode_preemption_args(await read_json(request, MAX_BODY_B))
    pod = request_of(args.pod, services.settings)  # a pod we cannot read is a bad request
    cluster = services.cluster
    now = services.clock.wall()
    view = shared_view(cluster, now)
    answer: dict[str, kubewire.MetaVictims | None] = {}
    proposed = {
        node: frozenset(v.uids) for node, v in args.victims.items() if v is not None and v.uids
    }
    if view is not None and proposed:
        settings = services.settings.evictions
        facts = pod_facts(args.pod, pod, settings.level_label)
        mono = services.clock.monotonic
        deadline = Deadline(mono, mono() + settings.preempt_deadline_s)
        narrowed = narrow_victims(view, facts, proposed, settings, now, deadline)
        if isinstance(narrowed, Refusal):
            request.app[REFUSALS].refused(services, facts.key, narrowed.reason)
        else:
            for node, victims in narrowed.items():
                answer[node] = kubewire.MetaVictims(uids=tuple(v.uid for v in victims))
    return json_reply(kubewire.preemption_reply(answer))


def add_routes(app: web.Application) -> None:
    app[ARGS_READER] = kubewire.ExtenderArgsReader()
    app[REFUSALS] = VerbRefusals()
    app[HOST_PRIORITIES] = kubewire.HostPriorityWriter()
    app.router.add_post(f"{PREFIX}/filter", filter_nodes)
    app.router.add_post(f"{PREFIX}/prioritize", prioritize_nodes)
    app.router.add_post(f"{PREFIX}/preempt", preempt)
