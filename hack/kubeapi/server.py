"""``KubeApi``: the emulator's aiohttp app on a real socket, and helpers to seed it.

    async with KubeApi.running() as api:          # in the test's event loop
        api.add_node("worker-1", capacity={"cpu": "32"})
        ...  # point any client at api.url

    with KubeApi.in_thread() as api:              # for the synchronous kubernetes client
        CoreV1Api(ApiClient(Configuration(host=api.url))).list_node()

The helpers write to ``api.store`` directly, bypassing admission (so a pod can be created
Running), and are safe to call from the test's thread while the server runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from common.clock import Clock, SystemClock
from hack.kubeapi import crud, discovery, errors, faults, objects, openapi, selectors
from hack.kubeapi.cluster import CLUSTER, Cluster
from hack.kubeapi.faults import Faults
from hack.kubeapi.kubeconfig import write_kubeconfig
from hack.kubeapi.resources import NAMESPACES, NODES, PDBS, PODS
from hack.kubeapi.store import Obj, Store
from hack.kubeapi.tokens import Identity, TokenBook

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
PUBLIC_PATHS = frozenset({"/version", "/version/", "/healthz", "/livez", "/readyz"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With ``require_auth``, a bearer token valid for the API audience (no RBAC after it)."""
    cluster = request.app[CLUSTER]
    if cluster.require_auth and request.path not in PUBLIC_PATHS:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        identity = None
        if scheme.lower() == "bearer":
            identity = cluster.tokens.authenticate(token.strip())[0]
        if identity is None:
            error = errors.unauthorized()
            return web.json_response(error.status, status=error.code)
    return await handler(request)


class KubeApi:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history: int = 1000,
        require_auth: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        watch_timeout_s: float = 1800.0,
        bookmark_interval_s: float = 60.0,
        kubelet: bool = True,
        clock: Clock | None = None,
    ) -> None:
        self.host, self.port, self.ssl_context = host, port, ssl_context
        self.store = Store(history)
        self.tokens = TokenBook()
        self.cluster = Cluster(
            self.store,
            self.tokens,
            require_auth=require_auth,
            watch_timeout_s=watch_timeout_s,
            bookmark_interval_s=bookmark_interval_s,
            kubelet=kubelet,
            clock=clock or SystemClock(),
        )
        for name in DEFAULT_NAMESPACES:
            self.store.create(NAMESPACES, objects.namespace(name))
        self.faults = Faults()
        """Failures to inject (:mod:`hack.kubeapi.faults`); none unless a test adds them."""
        self.url = ""
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[authenticate, faults.middleware(self.faults)])
        app[CLUSTER] = self.cluster
        discovery.add_routes(app)
        openapi.add_routes(app)
        app.router.add_route("*", "/api/{version}/{tail:.+}", crud.dispatch)
        app.router.add_route("*", "/apis/{group}/{version}/{tail:.+}", crud.dispatch)

        async def close_watches(_: web.Application) -> None:
            self.cluster.close_watches()

        app.on_shutdown.append(close_watches)
        return app

    # -------------------------------------------------------------- serving

    async def start(self) -> None:
        """Listen on ``host:port`` (port 0 picks a free one) and set ``url``."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        self._runner = web.AppRunner(self.app(), shutdown_timeout=5.0)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, ssl_context=self.ssl_context).start()
        scheme = "https" if self.ssl_context else "http"
        self.url = f"{scheme}://{self.host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, **options: Any) -> AsyncIterator[KubeApi]:
        api = cls(**options)
        await api.start()
        try:
            yield api
        finally:
            await api.stop()

    @classmethod
    @contextlib.contextmanager
    def in_thread(cls, **options: Any) -> Iterator[KubeApi]:
        """Serve from a thread with its own event loop, for synchronous callers."""
        api = cls(**options)
        loop = asyncio.new_event_loop()
        started = threading.Event()
        stop = asyncio.Event()
        failures: list[BaseException] = []

        async def serve() -> None:
            try:
                await api.start()
            except BaseException as e:  # handed to the caller's thread below
                failures.append(e)
                return
            finally:
                started.set()
            try:
                await stop.wait()
            finally:
                await api.stop()

        thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), name="kubeapi")
        thread.start()
        started.wait()
        try:
            if failures:
                raise failures[0]
            yield api
        finally:
            loop.call_soon_threadsafe(stop.set)
            thread.join()
            loop.close()

    # -------------------------------------------------------------- seeding

    def add_namespace(self, name: str) -> Obj:
        found = self.store.find(NAMESPACES, "", name)
        return (
            found if found is not None else self.store.create(NAMESPACES, objects.namespace(name))
        )

    def add_node(self, name: str, **fields: Any) -> Obj:
        """A Ready node; keyword arguments as ``objects.node`` (capacity, allocatable,
        labels, annotations, taints, unschedulable, ready, address)."""
        return self.store.create(NODES, objects.node(name, **fields))

    def add_pod(self, name: str, namespace: str = "default", **fields: Any) -> Obj:
        """A pod as its kubelet would have reported it; keyword arguments as ``objects.pod``
        (node, phase, labels, annotations, requests, limits, ready, priority)."""
        self.add_namespace(namespace)
        return self.store.create(PODS, objects.pod(name, namespace, **fields))

    def add_pdb(
        self,
        name: str,
        namespace: str,
        match_labels: Mapping[str, str],
        *,
        disruptions_allowed: int,
        current_healthy: int | None = None,
        desired_healthy: int | None = None,
        **spec: Any,
    ) -> Obj:
        """A PDB whose status the disruption controller has observed. ``current_healthy``
        defaults to the ready pods it selects now; ``desired_healthy`` to current minus
        allowed."""
        self.add_namespace(namespace)
        if current_healthy is None:
            selects = selectors.label_selector({"matchLabels": dict(match_labels)})
            pods = self.store.list(PODS, namespace)[0]
            current_healthy = sum(
                1 for p in pods if selects and selects(p) and objects.pod_is_ready(p)
            )
        if desired_healthy is None:
            desired_healthy = max(current_healthy - disruptions_allowed, 0)
        obj = objects.pdb(
            name,
            namespace,
            match_labels,
            disruptions_allowed=disruptions_allowed,
            current_healthy=current_healthy,
            desired_healthy=desired_healthy,
            **spec,
        )
        return self.store.create(PDBS, obj)

    def add_token(self, token: str, **identity: Any) -> Identity:
        """A bearer token for TokenReview and ``require_auth``; keyword arguments as
        ``TokenBook.add`` (node, pod, namespace, service_account, audiences, username,
        groups). A node-bound token gets the node's real uid when the node exists."""
        node = identity.get("node")
        if node and "node_uid" not in identity:
            found = self.store.find(NODES, "", node)
            if found is not None:
                identity["node_uid"] = found["metadata"]["uid"]
        return self.tokens.add(token, **identity)

    def kubeconfig(
        self,
        path: Path | str,
        *,
        token: str | None = None,
        namespace: str = "default",
        ca_file: Path | str | None = None,
    ) -> Path:
        """Write a kubeconfig for ``url`` (:func:`hack.kubeapi.kubeconfig.write_kubeconfig`)
        and return its path; call after ``start``."""
        if not self.url:
            raise RuntimeError("the emulator has no URL before it starts")
        return write_kubeconfig(path, self.url, token=token, namespace=namespace, ca_file=ca_file)
