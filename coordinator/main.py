"""``stowage coordinator``: serve reports and scheduler calls; watch, lead and publish.

``--standalone`` (see ``hack/standalone.py``) runs the same server against a built-in
Kubernetes API emulator instead of a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from aiohttp import web

from common import config as config_loader
from common.clock import SystemClock
from common.errors import ConfigError
from coordinator import app as coordinator_app
from coordinator import auth, eventloop
from coordinator.config import CoordinatorSettings
from coordinator.kube.client import api_client
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import Services


def settings_from(args: argparse.Namespace) -> CoordinatorSettings:
    settings = config_loader.load_file(CoordinatorSettings, args.config)
    changes: dict[str, Any] = {}
    if args.listen:
        changes["listen"] = args.listen
    if args.kubeconfig:
        changes["kube"] = dataclasses.replace(settings.kube, kubeconfig=args.kubeconfig)
    return dataclasses.replace(settings, **changes) if changes else settings


def main(args: argparse.Namespace) -> int:
    """Run against the cluster the kubeconfig (or the service account) names."""
    try:
        settings = settings_from(args)
        cluster = LiveCluster(settings, SystemClock(), CoordinatorMetrics())
        client = api_client(settings.kube.kubeconfig)
    except ConfigError as e:
        print(f"stowage coordinator: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # the client's config loaders raise anything on a bad file
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
        print(f"stowage coordinator: error: {settings.listen}: {e.strerror or e}", file=sys.stderr)
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
    app = coordinator_app.make_app(services, client)
    host, _, port = settings.listen.rpartition(":")
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    main_task = asyncio.current_task()
    assert main_task is not None
    # SIGTERM (a pod being stopped) shuts down as cleanly as Ctrl-C: the leader gives
    # its Lease back so a follower takes over at once.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    try:
        await web.TCPSite(runner, host.strip("[]"), int(port)).start()
        print(f"stowage coordinator serving on http://{settings.listen}", file=sys.stderr)
        await asyncio.Event().wait()  # until cancelled
    finally:
        await runner.cleanup()
        client.close()
