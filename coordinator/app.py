"""The coordinator as aiohttp applications: routes, and background tasks in order.

Every replica serves reports and the extender (:func:`make_app`); ``/debug/*`` and the
``/ui`` node map are another application (:func:`make_debug_app`), for a listener of its
own that is bound to localhost by default: they name pods, priorities and plans across
every namespace, which nobody who merely reaches the main port should read. Background
tasks run under
``cleanup_ctx`` so they start with the app and stop with it, in dependency order: the
Node/Pod watches fill the caches (``/readyz`` turns ready once they have), the expiry loop
turns silent nodes unknown, and — on the leader only — the publisher writes annotations.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from coordinator import debug, ingest, ui
from coordinator.autoscale import board, teller
from coordinator.autoscale import view as hintsview
from coordinator.consolidation import (
    crane,
    defragger,
    defragview,
    drainer,
    drainview,
    marker,
    patrol,
    reservedview,
    reserver,
    taint,
    view,
)
from coordinator.eviction import webhook
from coordinator.eviction.cycle import Cycle
from coordinator.eviction.executor import Executor, Sharing
from coordinator.extender import kube as kube_extender
from coordinator.extender import volcano as volcano_extender
from coordinator.kube import (
    approvals,
    colocation_events,
    cooldowns,
    events,
    evictions,
    gpu_health_events,
    leader,
    publisher,
    topology,
    watches,
)
from coordinator.live import cooldowns as shared_cooldowns
from coordinator.looplag import LoopLag
from coordinator.nodeview import NODE_VIEW, NodeView
from coordinator.services import SERVICES, Services

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

log = logging.getLogger(__name__)

API_CLIENT: Final = web.AppKey["ApiClient"]("api_client")
"""The kubernetes client, named as a string: the package loads only when a cluster is
watched."""
LOOP_LAG: Final = web.AppKey("loop_lag", LoopLag)


def make_app(
    services: Services, api_client: ApiClient | None = None, *, kube_scheduler: bool = True
) -> web.Application:
    """The application; with ``api_client`` (the kubernetes client) it also watches the
    cluster; without it the node set is whatever the caller puts in (tests, benchmarks).
    ``kube_scheduler=False`` leaves the kube-scheduler extender to :func:`make_extender_app`
    on a listener of its own."""
    app = web.Application(client_max_size=services.settings.ingest.max_body_b)
    app[SERVICES] = services
    ingest.add_routes(app)
    if kube_scheduler:
        kube_extender.add_routes(app)
    volcano_extender.add_routes(app)
    app[NODE_VIEW] = NodeView(services.cluster)
    app[view.PATROL] = patrol.Patrol(services.cluster, services.settings.patrol, services.clock)
    app[hintsview.HINTS] = board.Board(
        services.cluster, services.settings.autoscale, services.clock
    )
    app[LOOP_LAG] = LoopLag(services.clock)
    if services.settings.evictions.approval_webhook:
        secret = webhook.read_secret(services.settings.evictions.approval_webhook_secret_file)
        hook = webhook.ApprovalHook(
            services.settings.evictions, secret, services.metrics, services.clock,
            services.leader.is_set,
        )  # fmt: skip
        webhook.add_routes(app, hook)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.cleanup_ctx.append(_expiry)
    app.cleanup_ctx.append(_loop_lag)
    if api_client is None:
        services.synced.set()
    else:
        app[API_CLIENT] = api_client
        app.cleanup_ctx.append(_watches)
        app.cleanup_ctx.append(_leadership)
    return app


def make_extender_app(services: Services) -> web.Application:
    """The kube-scheduler extender alone (``/scheduler/*``), for a listener of its own
    that asks callers for a client certificate. Volcano's extender plugin has no TLS
    client settings, so ``/volcano/*`` stays with :func:`make_app`. Background tasks run
    in the main application only; this one shares its :class:`Services`."""
    app = web.Application(client_max_size=services.settings.ingest.max_body_b)
    app[SERVICES] = services
    kube_extender.add_routes(app)
    return app


def make_debug_app(
    services: Services,
    node_view: NodeView | None = None,
    watch: patrol.Patrol | None = None,
    hints: board.Board | None = None,
) -> web.Application:
    """``/debug/*`` and ``/ui`` alone, for the debug listener (``server.debug_listen``).
    ``node_view`` is the main application's, so that ``/debug/nodes`` and the per-node
    gauges in ``/metrics`` share one view (and its cache of pod shapes); ``watch`` is its
    utilisation patrol, whose windows ``/debug/patrol`` shows; ``hints`` its autoscaling
    hints (``/debug/hints``). Read-only:
    background tasks run in the main application only."""
    app = web.Application()
    app[SERVICES] = services
    app[NODE_VIEW] = node_view if node_view is not None else NodeView(services.cluster)
    app[view.PATROL] = watch or patrol.Patrol(
        services.cluster, services.settings.patrol, services.clock
    )
    app[hintsview.HINTS] = hints or board.Board(
        services.cluster, services.settings.autoscale, services.clock
    )
    debug.add_routes(app)
    view.add_routes(app)
    hintsview.add_routes(app)
    drainview.add_routes(app)
    defragview.add_routes(app)
    reservedview.add_routes(app)
    ui.add_routes(app)
    return app


def settle_heap() -> None:
    """Take what is alive now out of the cyclic garbage collector's sight (``gc.freeze``).

    Called once, when the caches first hold the whole cluster: the listed Nodes and Pods
    and the imported libraries are most of the heap and live on, and every full collection
    would walk them all again — tens of milliseconds in which no scheduler call is
    answered. Frozen objects are still freed when no longer referenced; only a cycle
    among them would never be (the caches hold plain JSON trees: none)."""
    gc.collect()
    gc.freeze()


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    """Ready once the caches are filled, and while the event loop keeps up."""
    services = request.app[SERVICES]
    if not services.synced.is_set():
        return web.Response(text="waiting for the Node and Pod caches\n", status=503)
    lag = request.app[LOOP_LAG].lag_s()
    limit = services.settings.server.ready_max_loop_lag_s
    if lag > limit:
        return web.Response(
            text=f"event loop {lag:.2f} s behind (more than {limit:g} s)\n", status=503
        )
    return web.Response(text="ready\n")


async def metrics(request: web.Request) -> web.Response:
    """The registry in Prometheus's text format. The per-node gauges are read from the node
    view here, on the event loop where the cluster state changes; the text is made in a
    worker thread, since 2,000 nodes are some 18,000 samples (about 0.1 s of formatting)
    that would otherwise hold up every scheduler call and report meanwhile."""
    exported = request.app[SERVICES].metrics
    exported.nodes.tiles = request.app[NODE_VIEW].tiles()
    exported.loop_lag.set(request.app[LOOP_LAG].lag_s())
    body = await asyncio.to_thread(generate_latest, exported.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _expiry(app: web.Application) -> AsyncIterator[None]:
    services = app[SERVICES]
    freshness = services.cluster.freshness

    async def loop() -> None:
        while True:
            for name in services.cluster.expire():
                why = freshness.verdict(name).reason
                log.info("node %s: %s, now unknown (neutral)", name, why)
            await asyncio.sleep(freshness.expiry_period_s)

    task = asyncio.create_task(loop(), name="stowage-expiry")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _loop_lag(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(app[LOOP_LAG].run(), name="stowage-loop-lag")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _watches(app: web.Application) -> AsyncIterator[None]:
    from kubernetes import client

    services = app[SERVICES]
    cluster = services.cluster
    core = client.CoreV1Api(app[API_CLIENT])
    loop = asyncio.get_running_loop()
    pending = {"nodes", "pods"}

    def synced(resource: str) -> Callable[[], None]:
        def mark() -> None:
            pending.discard(resource)
            if not pending and not services.synced.is_set():
                settle_heap()
                services.synced.set()

        return mark

    reflectors = [
        watches.Reflector(
            "nodes",
            core.list_node,
            watches.Feed(
                replace=cluster.replace_nodes,
                upsert=_guarded(cluster.upsert_node),
                delete=lambda node: cluster.remove_node(
                    (node.get("metadata") or {}).get("name") or ""
                ),
                synced=synced("nodes"),
            ),
            loop,
            services.metrics,
            services.settings.kube.resync_s,
        ),
        watches.Reflector(
            "pods",
            core.list_pod_for_all_namespaces,
            watches.Feed(
                replace=cluster.replace_pods,
                upsert=cluster.upsert_pod,
                delete=cluster.remove_pod,
                synced=synced("pods"),
            ),
            loop,
            services.metrics,
            services.settings.kube.resync_s,
        ),
        # Not awaited by /readyz (the extender does not need it); the eviction planner
        # plans nothing until the first list has arrived.
        watches.Reflector(
            "poddisruptionbudgets",
            client.PolicyV1Api(app[API_CLIENT]).list_pod_disruption_budget_for_all_namespaces,
            watches.Feed(
                replace=cluster.budgets.replace,
                upsert=cluster.budgets.upsert,
                delete=cluster.budgets.remove,
                synced=lambda: None,
            ),
            loop,
            services.metrics,
            services.settings.kube.resync_s,
        ),
        # Volcano's PodGroups, whose spec.queue is their pods' queue (the planner's
        # cooldown and approval rule); optional: without Volcano there are none.
        watches.Reflector(
            "podgroups",
            functools.partial(
                client.CustomObjectsApi(app[API_CLIENT]).list_cluster_custom_object,
                "scheduling.volcano.sh",
                "v1beta1",
                "podgroups",
            ),
            watches.Feed(
                replace=cluster.podgroups.replace,
                upsert=cluster.podgroups.upsert,
                delete=cluster.podgroups.remove,
                synced=lambda: None,
                optional=True,
            ),
            loop,
            services.metrics,
            services.settings.kube.resync_s,
        ),
        # The queue cooldowns the leader shares (coordinator.live.cooldowns): the preempt
        # verb honours them on every replica. Not awaited by /readyz either.
        watches.Reflector(
            "cooldowns",
            functools.partial(
                client.CoordinationV1Api(app[API_CLIENT]).list_namespaced_lease,
                services.settings.kube.namespace,
                field_selector=f"metadata.name={shared_cooldowns.LEASE}",
            ),
            watches.Feed(
                replace=cluster.cooldowns.replace,
                upsert=cluster.cooldowns.upsert,
                delete=cluster.cooldowns.remove,
                synced=lambda: None,
            ),
            loop,
            services.metrics,
            services.settings.kube.resync_s,
        ),
    ]
    if services.settings.autoscale.enabled:
        reflectors += _capacity_reflectors(app, loop)
    for reflector in reflectors:
        reflector.start()
    yield
    for reflector in reflectors:
        reflector.stop()


def _capacity_reflectors(
    app: web.Application, loop: asyncio.AbstractEventLoop
) -> list[watches.Reflector]:
    """Volcano's Queues and the ResourceQuotas: what each queue may hold, for the
    autoscaling hints. Both optional (a type not served is none: no Volcano, or the API
    emulator's lack of quotas); not awaited by /readyz: only the hints wait for them."""
    from kubernetes import client

    services, capacities = app[SERVICES], app[hintsview.HINTS].capacities
    resync_s = services.settings.kube.resync_s
    return [
        watches.Reflector(
            "queues",
            functools.partial(
                client.CustomObjectsApi(app[API_CLIENT]).list_cluster_custom_object,
                "scheduling.volcano.sh",
                "v1beta1",
                "queues",
            ),
            watches.Feed(
                replace=capacities.replace_queues,
                upsert=capacities.upsert_queue,
                delete=capacities.remove_queue,
                synced=lambda: None,
                optional=True,
            ),
            loop,
            services.metrics,
            resync_s,
        ),
        watches.Reflector(
            "resourcequotas",
            client.CoreV1Api(app[API_CLIENT]).list_resource_quota_for_all_namespaces,
            watches.Feed(
                replace=capacities.replace_quotas,
                upsert=capacities.upsert_quota,
                delete=capacities.remove_quota,
                synced=lambda: None,
                optional=True,
            ),
            loop,
            services.metrics,
            resync_s,
        ),
    ]


async def _leadership(app: web.Application) -> AsyncIterator[None]:
    """Leader election, and the work only the leader does (publishing, evicting); one
    Event recorder for all of it."""
    from kubernetes import client

    services = app[SERVICES]
    settings = services.settings
    identity = f"{socket.gethostname()}_{os.getpid()}_{secrets.token_hex(3)}"
    elector = leader.LeaderElector(
        client.CoordinationV1Api(app[API_CLIENT]),
        settings.kube.namespace,
        identity,
        settings.leader,
        services.leader,
        services.metrics,
    )
    # Every writer other than the elector passes ``elector.fence`` right before each write.
    tasks = [asyncio.create_task(elector.run(), name="stowage-leader")]
    if settings.publisher.enabled:
        load = None
        if settings.publisher.crane_annotations:  # every replica samples; the leader writes
            load = crane.CraneLoad(services.cluster, services.clock)
            tasks.append(asyncio.create_task(crane.run(load), name="stowage-crane-load"))
        pub = publisher.Publisher(
            services.cluster,
            publisher.merge_patcher(app[API_CLIENT]),
            settings.publisher,
            services.metrics,
            services.leader,
            elector.fence,
            extra=None if load is None else load.annotations,
        )
        tasks.append(asyncio.create_task(pub.run(), name="stowage-publisher"))
    if settings.topology_export.enabled:
        exporter = topology.TopologyExporter(
            services.cluster,
            topology.topology_api(app[API_CLIENT]),
            settings.topology_export,
            services.leader,
            elector.fence,
        )
        tasks.append(asyncio.create_task(exporter.run(), name="stowage-topology-export"))
    recorder = events.EventRecorder(
        client.CoreV1Api(app[API_CLIENT]),
        elector.fence,
        services.clock,
        settings.events,
        services.metrics,
        instance=identity,
    )
    evictor = evictions.Evictor(app[API_CLIENT], elector.fence)
    approved = approvals.ApprovalReader(app[API_CLIENT], settings.kube.namespace)
    shared = cooldowns.CooldownLease(app[API_CLIENT], settings.kube.namespace, elector.fence)
    executor = Executor(
        settings.evictions, evictor, recorder, evictor, approved, services.metrics,
        services.clock, services.evictions, Sharing(services.cluster.cooldowns, shared),
        app.get(webhook.HOOK),
    )  # fmt: skip
    cycle = Cycle(services.cluster, executor)
    homes = reserver.Reserver(services.cluster, settings.evictions, cycle.write, recorder)
    drains = drainer.Drainer(
        settings.drain, settings.evictions, executor, taint.taint_writer(app[API_CLIENT]),
        recorder, elector.fence, services.clock, homes,
    )  # fmt: skip
    migrations = defragger.Defragger(
        settings.defrag, settings.evictions, executor, cycle.nominate, services.clock, homes
    )

    async def consolidating() -> None:
        await homes.tidy()
        await drains.cycle(services.cluster, app[view.PATROL])
        await migrations.cycle(services.cluster)

    tasks.append(
        asyncio.create_task(_evicting(services, cycle, consolidating), name="stowage-evictions")
    )
    # With an election, only the leader's colocation answers are valid (coordinator.ingest);
    # its throttle changes become Events on the Node.
    colocation = services.cluster.colocation
    colocation.elected = True
    tasks.append(
        asyncio.create_task(
            colocation_events.write_events(colocation, recorder, services.leader),
            name="stowage-colocation-events",
        )
    )
    tasks.append(  # a change of a node's unhealthy GPUs becomes an Event on it
        asyncio.create_task(
            gpu_health_events.write_events(services.cluster, recorder, services.leader),
            name="stowage-gpu-health-events",
        )
    )
    if settings.patrol.enabled:  # every replica samples; the leader marks (and cordons if set)
        watch = app[view.PATROL]
        marks = marker.Marker(
            watch,
            marker.marked_nodes(app[API_CLIENT]),
            publisher.merge_patcher(app[API_CLIENT]),
            recorder,
            elector.fence,
            settings.patrol,
            services.metrics,
            services.clock,
        )
        tasks.append(
            asyncio.create_task(
                marker.run(
                    watch,
                    marks,
                    lambda: list(services.cluster.specs),
                    services.leader,
                    services.clock,
                ),
                name="stowage-patrol",
            )
        )
    if settings.autoscale.enabled:  # every replica works hints out; the leader tells them
        hints = app[hintsview.HINTS]
        tells = teller.Teller(
            teller.annotated(app[API_CLIENT]), teller.patcher(app[API_CLIENT]), recorder,
            elector.fence, settings.autoscale, services.clock,
        )  # fmt: skip
        tasks.append(
            asyncio.create_task(
                teller.run(
                    hints.planner,
                    tells,
                    services.metrics,
                    services.leader,
                    settings.autoscale,
                    hints.keep,
                ),
                name="stowage-scale-hints",
            )
        )
    yield
    for task in reversed(tasks):  # stop publishing and evicting before giving the lease back
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _evicting(
    services: Services, cycle: Cycle, drains: Callable[[], Awaitable[object]]
) -> None:
    """The eviction cycle, on the leader only (dry run unless ``evictions.enabled``), then
    the drains (:mod:`coordinator.consolidation.drainer`) and the migrations
    (:mod:`coordinator.consolidation.defragger`) through the same executor and caps. A
    cycle that fails is logged and the next one starts afresh from the watches."""
    while True:
        if not services.leader.is_set():
            await services.leader.wait()
        try:
            await cycle.run()
            await drains()
        except Exception:
            log.exception("eviction cycle failed")
        await asyncio.sleep(services.settings.evictions.cycle_s)


def _guarded(upsert: Callable[[Any], None]) -> Callable[[Any], None]:
    """A malformed object is logged and skipped; it must not stop the watch."""

    def call(obj: Any) -> None:
        try:
            upsert(obj)
        except ValueError as e:
            log.warning("ignoring %s", e)

    return call
