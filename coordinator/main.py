"""``stowage coordinator``: serve reports and scheduler calls; watch, lead and publish.

``--standalone`` (see ``hack/standalone.py``) runs the same server against a built-in
Kubernetes API emulator instead of a cluster.

The coordinator serves two listeners, or three (:func:`build_listeners`):

* the main one (``listen``): agents' reports, which authenticate with their bearer tokens,
  Volcano's extender, health and metrics;
* the debug one (``server.debug_listen``, 127.0.0.1:8081): ``/debug/*`` and the ``/ui``
  node map, which name pods, priorities and plans in every namespace. On localhost, only
  what runs in the pod reaches it — ``kubectl port-forward`` does, behind the caller's own
  Kubernetes credentials — whatever a NetworkPolicy admits to the pod's other ports;
* with ``server.extender_listen``, a second one for the kube-scheduler extender
  (``/scheduler/*``), which then leaves the main one. It serves TLS
  (``server.tls_cert_file``) and, with ``server.tls_client_ca_file``, asks every caller
  for a client certificate that CA signed (mutual TLS, as kube-scheduler's extender
  ``tlsConfig`` offers).

Mutual TLS gets a listener of its own so that agents need no client certificates: asking
for one on the main listener would turn every agent away, while a certificate *offered*
but optional would let any caller without one through. The main listener then stays plain
HTTP: agents reach every replica by its pod IP (``--fan-out``), which a certificate for
the Service's name does not cover, and they prove who they are with their tokens. Without
an extender listener, the TLS certificate is served on the main listener (no client CA).
Volcano's extender plugin has no TLS client settings, so ``/volcano/*`` stays on the main
listener.

All are :class:`common.listener.Listener`: a total read deadline per request, an idle
timeout and a cap on open connections, so slow clients cannot starve the others.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from common import config as config_loader
from common import listener
from common.clock import SystemClock
from common.errors import ConfigError
from coordinator import app as coordinator_app
from coordinator import auth, eventloop
from coordinator.autoscale.view import HINTS
from coordinator.config import CoordinatorSettings
from coordinator.consolidation.view import PATROL
from coordinator.kube.client import api_client
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.nodeview import NODE_VIEW
from coordinator.services import Services

log = logging.getLogger(__name__)


def settings_from(args: argparse.Namespace) -> CoordinatorSettings:
    settings = config_loader.load_file(CoordinatorSettings, args.config)
    changes: dict[str, Any] = {}
    if args.listen:
        changes["listen"] = args.listen
    if args.kubeconfig:
        changes["kube"] = dataclasses.replace(settings.kube, kubeconfig=args.kubeconfig)
    server = {
        name: getattr(args, name)
        for name in (
            "extender_listen",
            "debug_listen",
            "tls_cert_file",
            "tls_key_file",
            "tls_client_ca_file",
        )
        if getattr(args, name, None)
    }
    if server:
        changes["server"] = dataclasses.replace(settings.server, **server)
    return dataclasses.replace(settings, **changes) if changes else settings


def main(args: argparse.Namespace) -> int:
    """Run against the cluster the kubeconfig (or the service account) names."""
    try:
        settings = settings_from(args)
        cluster = LiveCluster(settings, SystemClock(), CoordinatorMetrics())
    except ConfigError as e:
        print(f"stowage coordinator: error: {e}", file=sys.stderr)
        return 2
    try:
        client = api_client(settings.kube.kubeconfig)
    except Exception as e:  # the client's config loaders raise anything on a bad file
        if settings.kube.kubeconfig is None:  # in-cluster config, and no cluster around
            print(
                f"stowage coordinator: error: not inside a Kubernetes cluster ({e}):"
                " pass --kubeconfig PATH, or --standalone for the built-in API emulator",
                file=sys.stderr,
            )
        else:
            print(f"stowage coordinator: error: Kubernetes client: {e}", file=sys.stderr)
        return 2
    return run(serve(settings, cluster, client), settings)


def run(server: Coroutine[Any, Any, None], settings: CoordinatorSettings) -> int:
    """Run ``server`` until Ctrl-C or SIGTERM; exit code 2 on a bad setting or address."""
    try:
        eventloop.run(server)
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    except ConfigError as e:
        print(f"stowage coordinator: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"stowage coordinator: error: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


async def serve(settings: CoordinatorSettings, cluster: LiveCluster, client: Any) -> None:
    """Serve until cancelled, with ``client`` (the kubernetes ApiClient) as the API."""
    services = Services(
        settings=settings,
        clock=cluster.clock,
        metrics=cluster.metrics,
        cluster=cluster,
        authenticator=auth.build_authenticator(settings, lambda: client),
    )
    listeners = build_listeners(settings, services, client)
    main_task = asyncio.current_task()
    assert main_task is not None
    # SIGTERM (a pod being stopped) shuts down as cleanly as Ctrl-C: the leader gives
    # its Lease back so a follower takes over at once.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    started: list[listener.Listener] = []
    try:
        for site, serves in listeners:
            await site.start()
            started.append(site)
            print(f"stowage coordinator serving{serves} on {site.url}", file=sys.stderr)
        await asyncio.Event().wait()  # until cancelled
    finally:
        for site in reversed(started):  # the main one, with the background tasks, last
            await site.stop()
        client.close()


def build_listeners(
    settings: CoordinatorSettings, services: Services, client: Any | None
) -> list[tuple[listener.Listener, str]]:
    """The listeners ``settings`` ask for, not started, the main one first, each with
    what it serves in words for the banner (nothing for the main one). Each gets
    ``server.max_connections``, or its share of what the process's open-file limit fits
    (with a warning)."""
    server = settings.server
    wanted = server.max_connections
    count = 1 + (server.extender_listen is not None) + (server.debug_listen is not None)
    fits = listener.fit_connections(wanted * count) // count
    if fits < wanted:
        log.warning(
            "the open-file limit fits %d connections per listener, not max_connections=%d",
            fits,
            wanted,
        )
    limits = listener.Limits(
        read_timeout_s=server.read_timeout_s,
        keepalive_timeout_s=server.keepalive_timeout_s,
        max_connections=min(wanted, fits),
    )
    tls = None
    if server.tls_cert_file is not None and server.tls_key_file is not None:
        tls = listener.server_tls(
            server.tls_cert_file, server.tls_key_file, server.tls_client_ca_file
        )
    split = server.extender_listen is not None
    app = coordinator_app.make_app(services, client, kube_scheduler=not split)
    host, port = _address(settings.listen)
    # TLS goes where the scheduler calls: its own listener when it has one.
    found = [(listener.Listener(app, host, port, limits, tls=None if split else tls), "")]
    if server.extender_listen is not None:
        host, port = _address(server.extender_listen)
        extender = listener.Listener(
            coordinator_app.make_extender_app(services), host, port, limits, tls=tls
        )
        mutual = " (client certificates required)" if server.tls_client_ca_file else ""
        found.append((extender, f" the kube-scheduler extender{mutual}"))
    if server.debug_listen is not None:
        host, port = _address(server.debug_listen)
        debug = coordinator_app.make_debug_app(services, app[NODE_VIEW], app[PATROL], app[HINTS])
        found.append((listener.Listener(debug, host, port, limits), " /debug and /ui"))
    return found


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)
