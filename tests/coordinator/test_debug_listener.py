"""``/debug/*`` and ``/ui`` are served on the debug listener only (``server.debug_listen``,
127.0.0.1:8081 by default), over real sockets as ``stowage coordinator`` builds them
(:func:`coordinator.main.build_listeners`): they name pods, priorities and plans in every
namespace, so the main port — which agents, schedulers and Prometheus reach — must not
answer them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from cli import colocation, plan, top
from cli.main import build_parser
from common.clock import SystemClock
from common.errors import ConfigError
from coordinator import app as coordinator_app
from coordinator import main as coordinator_main
from coordinator.config import CoordinatorSettings, ServerSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import Services
from tests.coordinator.test_listeners import Start, settings_with, start

__all__ = ["start"]  # the fixture of test_listeners: the listeners, started and stopped

DEFAULT = CoordinatorSettings().server.debug_listen


def services_for(settings: CoordinatorSettings) -> Services:
    metrics = CoordinatorMetrics()
    cluster = LiveCluster(settings, SystemClock(), metrics)
    return Services(settings, cluster.clock, metrics, cluster, authenticator=None)  # type: ignore[arg-type]  # no route here asks one


def routed(app: web.Application) -> set[str]:
    return {resource.canonical for resource in app.router.resources()}


async def status(url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        await response.read()
        return response.status


def listening(port: int) -> set[str]:
    """The local addresses the kernel has a TCP socket listening on ``port`` at
    (``/proc/net/tcp``, IPv4, state 0A), as dotted quads."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return found


def test_the_main_application_routes_nothing_of_debug_or_the_ui() -> None:
    services = services_for(CoordinatorSettings())
    main = routed(coordinator_app.make_app(services))
    debug = routed(coordinator_app.make_debug_app(services))
    assert {"/ui", "/debug/nodes", "/debug/plan", "/debug/explain"} <= debug
    assert [p for p in main if p.startswith(("/debug", "/ui"))] == []


async def test_the_main_port_answers_404_to_debug_and_ui_which_the_debug_port_serves(
    start: Start,
) -> None:
    listeners = await start(settings_with(debug_listen="127.0.0.1:0"))
    main, debug = listeners[0], listeners[-1]
    paths = sorted(routed(coordinator_app.make_debug_app(services_for(CoordinatorSettings()))))
    for path in paths:
        assert await status(main.url + path) == 404, path
        assert await status(debug.url + path) != 404, path  # 400 where a query is missing
    assert await status(debug.url + "/ui") == 200
    assert await status(debug.url + "/debug/nodes") == 200
    assert await status(main.url + "/metrics") == 200  # still scraped where it was
    assert await status(debug.url + "/metrics") == 404


def test_the_debug_listener_is_on_localhost_by_default() -> None:
    assert DEFAULT == "127.0.0.1:8081"
    defaults = coordinator_main.settings_from(build_parser().parse_args(["coordinator"]))
    assert defaults.server.debug_listen == DEFAULT


async def test_the_debug_socket_is_bound_to_loopback_only(start: Start) -> None:
    """The default's host, on a free port (the default port may be taken on this machine):
    the kernel's socket table shows it listening on 127.0.0.1 and nowhere else."""
    host = DEFAULT.rpartition(":")[0]
    listeners = await start(settings_with(debug_listen=f"{host}:0"))
    debug = listeners[-1]
    assert await status(debug.url + "/ui") == 200
    assert listening(debug.port) == {"127.0.0.1"}


def test_debug_listen_is_a_setting_and_a_flag() -> None:
    args = build_parser().parse_args(["coordinator", "--debug-listen", "127.0.0.1:9"])
    assert coordinator_main.settings_from(args).server.debug_listen == "127.0.0.1:9"
    with pytest.raises(ConfigError, match="server.debug_listen"):
        ServerSettings(debug_listen="8081")
    services = services_for(CoordinatorSettings())
    off = settings_with(debug_listen=None)
    assert [serves for _, serves in coordinator_main.build_listeners(off, services, None)] == [""]


@pytest.mark.parametrize(
    ("command", "argv"),
    [(top, []), (colocation, []), (plan, ["--explain", "--pod", "ns/p"])],
    ids=["top", "colocation", "plan"],
)
def test_the_explain_commands_ask_the_debug_listener_by_default(
    command: object, argv: list[str]
) -> None:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)  # type: ignore[attr-defined]
    assert parser.parse_args(argv).coordinator == f"http://{DEFAULT}"
