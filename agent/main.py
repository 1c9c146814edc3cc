"""``stowage agent``: collect this node's signals every interval and report them.

``--once`` prints one report and exits (rate collectors are sampled twice, a short
window apart, so the report carries rates too). Otherwise the agent loops: collect all
sections concurrently, hand the report to the reporter (which keeps only the newest
one while the coordinator is away), sleep interval × (1 ± jitter), repeat until SIGTERM.
Either way, every start first puts back any cgroup value a killed predecessor left changed
(:mod:`agent.recovery`), with or without ``--enforce``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import socket
import sys
from typing import Any, BinaryIO

from agent import metrics as agent_metrics
from agent import recovery, registry
from agent.collectors.base import Collector, Runner
from agent.collectors.pods import PodsCollector
from agent.colocation import BeThrottle
from agent.enforcer import Enforcer
from agent.fanout import FanOutReporter
from agent.hostpaths import HostPaths
from agent.metrics import AgentMetrics
from agent.reporter import Reporter
from agent.settings import AgentSettings, EnforcerSettings, PodsSettings, ReporterSettings
from common import codec
from common.clock import Clock, SystemClock
from common.errors import ConfigError, HostPathError
from common.schema import SCHEMA_VERSION, SECTIONS, Absent, NodeReport, PodsSection
from common.version import version

log = logging.getLogger(__name__)

MAX_SAMPLE_WINDOW_S = 60.0
"""Longest ``--once`` wait between two rate samples: rates over a longer window are what
the loop mode is for, and an unbounded one (``inf``) would never print a report."""


class Agent:
    """The collectors of one node and the report they make together."""

    def __init__(self, settings: AgentSettings, clock: Clock, metrics: AgentMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self._clock = clock
        self._collectors: dict[str, Collector] = {
            name: registry.COLLECTORS[name].build(settings, clock) for name in settings.collectors
        }
        self._runner = Runner(metrics, settings.collector_timeout_s)
        self._seq = 0
        self.throttle: BeThrottle | None = None
        """The colocation side (``--enforce``): sees each pods section, reports what it applied."""

    async def collect(self) -> NodeReport:
        """Run every collector, one after another, and assemble one report."""
        sections: dict[str, Any] = {s: Absent("disabled") for s in SECTIONS}
        for name, collector in self._collectors.items():
            spec = registry.COLLECTORS[name]
            sections[name] = await self._runner.run_one(collector, isolated=spec.isolated)
        self._seq += 1
        pod_usage = None
        pods_collector = self._collectors.get(PodsCollector.name)
        if isinstance(pods_collector, PodsCollector) and isinstance(sections["pods"], PodsSection):
            pod_usage = pods_collector.pod_usage  # measured with this very section
        enforcement = None
        if self.throttle is not None:
            pods = sections.get("pods")
            self.throttle.pods_seen(pods if isinstance(pods, PodsSection) else None)
            enforcement = self.throttle.status()
        return NodeReport(
            enforcement=enforcement,
            pod_usage=pod_usage,
            schema_version=SCHEMA_VERSION,
            node=self.settings.node_name,
            agent_version=version(),
            seq=self._seq,
            measured_at=self._clock.wall(),
            **sections,
        )

    async def prime(self) -> None:
        """Take a first sample from collectors that report rates, so the next has deltas."""
        for name, collector in self._collectors.items():
            if registry.COLLECTORS[name].rates:
                await self._runner.run_one(collector)

    def close(self) -> None:
        self._runner.close()
        for collector in self._collectors.values():
            close = getattr(collector, "close", None)
            if close is not None:
                close()


async def collect_once(agent: Agent, window_s: float) -> NodeReport:
    """One report, rate collectors sampled ``window_s`` apart."""
    await agent.prime()
    await asyncio.sleep(window_s)
    return await agent.collect()


def write_report(report: NodeReport, output: str, out: BinaryIO) -> None:
    if output == "msgpack":
        out.write(codec.encode(report))
    else:
        out.write(json.dumps(codec.to_plain(report), indent=2).encode() + b"\n")
    out.flush()


async def run_loop(
    agent: Agent,
    reporter: Reporter | FanOutReporter,
    rng: random.Random,
    metrics_at: tuple[str, int] | None = None,
) -> int:
    """Collect and offer reports until SIGINT/SIGTERM; serve /metrics if asked to."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    interval, jitter = agent.settings.interval_s, agent.settings.jitter_frac
    metrics_listener = None
    if metrics_at is not None:
        try:
            metrics_listener = await agent_metrics.serve(agent.metrics, *metrics_at)
        except OSError as e:  # the port is taken: a setting to change, not a crash
            raise ConfigError(f"--metrics-listen {e.strerror or e}") from e
    await reporter.start()
    colocation = None
    if agent.throttle is not None:
        colocation = asyncio.create_task(agent.throttle.run(), name="stowage-colocation")
    log.info(
        "agent for node %s reporting to %s every %g s",
        agent.settings.node_name,
        agent.settings.reporter.coordinator_url,
        interval,
    )
    try:
        # A random first wait spreads a fleet restarted at once (a DaemonSet rollout).
        delay = rng.uniform(0, interval * jitter)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                break
            started = loop.time()
            reporter.offer(await agent.collect())
            elapsed = loop.time() - started
            delay = max(0.0, interval * (1 + rng.uniform(-jitter, jitter)) - elapsed)
    finally:
        if colocation is not None:  # its end restores the node's defaults (SIGTERM)
            colocation.cancel()
            await asyncio.gather(colocation, return_exceptions=True)
        await reporter.stop()
        if metrics_listener is not None:
            await metrics_listener.stop()
    log.info("agent stopped")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--once", action="store_true", help="print one report and exit")
    add("--output", choices=("json", "msgpack"), default="json", help="format for --once")
    add("--coordinator", metavar="URL", help="coordinator base URL (loop mode)")
    add("--token-file", help="bearer token file for the coordinator (re-read on every send)")
    add("--ca-file", help="CA bundle for an https coordinator")
    add(
        "--fan-out",
        action="store_true",
        help="report to every address the coordinator name resolves to (all replicas)",
    )
    add(
        "--node-name",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="this node's name (default: $NODE_NAME, else the hostname)",
    )
    add("--proc-root", default="/proc", help="host /proc (DaemonSet: /host/proc)")
    add("--sys-root", default="/sys", help="host /sys (DaemonSet: /host/sys)")
    add("--cgroup-root", help="host cgroup mount (default: <sys-root>/fs/cgroup)")
    add(
        "--kubelet-config",
        default="/var/lib/kubelet/config.yaml",
        help="kubelet configuration file",
    )
    add("--interval", type=float, default=10.0, help="seconds between reports")
    add("--jitter", type=float, default=0.1, help="fraction of the interval to randomise")
    add(
        "--sample-window",
        type=float,
        default=0.5,
        help="--once: seconds between the two samples rates are computed from",
    )
    add("--collector-timeout", type=float, default=5.0, help="seconds per collector")
    add("--collectors", default="", help="comma list of collectors to run (default: all)")
    add("--disable", default="", help="comma list of collectors to skip")
    add("--pods-source", default="auto", help="auto, apiserver, kubelet or none")
    add(
        "--refresh",
        type=int,
        default=30,
        metavar="N",
        help="send the report whole every N reports; in between, pods only when they changed"
        " and no memory-contiguity detail (0: every report whole)",
    )
    add("--kubeconfig", help="kubeconfig for the pods source (default: in-cluster)")
    add("--kubelet-url", help="kubelet URL for the kubelet pods source")
    add("--kubelet-ca-file", help="CA bundle for the kubelet's certificate")
    add("--kubelet-token-file", help="bearer token file for the kubelet")
    add("--metrics-listen", metavar="HOST:PORT", help="serve /metrics and /healthz here")
    add(
        "--enforce",
        action="store_true",
        help="apply the coordinator's best-effort CPU quota to this node's cgroups (loop mode)",
    )
    add(
        "--enforcer-journal",
        default="/var/lib/stowage/enforcer.json",
        help="where the original cgroup values are kept until restored (survives restarts)",
    )


def settings_from(args: argparse.Namespace) -> AgentSettings:
    paths = HostPaths.under(args.proc_root, args.sys_root, args.cgroup_root, args.kubelet_config)
    names = registry.select(_names(args.collectors), _names(args.disable))
    return AgentSettings(
        paths=paths,
        node_name=args.node_name,
        interval_s=args.interval,
        jitter_frac=args.jitter,
        collector_timeout_s=args.collector_timeout,
        collectors=tuple(names),
        pods=PodsSettings(
            source=args.pods_source,
            kubeconfig=args.kubeconfig,
            kubelet_url=args.kubelet_url,
            kubelet_ca_file=args.kubelet_ca_file,
            token_file=args.kubelet_token_file,
            # Below the collector timeout, so a slow API server reads as "unreachable".
            timeout_s=0.8 * args.collector_timeout,
        ),
        reporter=ReporterSettings(
            coordinator_url=args.coordinator,
            token_file=args.token_file,
            ca_file=args.ca_file,
            fan_out=args.fan_out,
            refresh_reports=args.refresh,
        ),
        enforcer=EnforcerSettings(enabled=args.enforce, journal=args.enforcer_journal),
    )


async def _serve(
    agent: Agent,
    settings: AgentSettings,
    clock: Clock,
    metrics: AgentMetrics,
    metrics_at: tuple[str, int] | None,
    enforcer: Enforcer | None,
) -> int:
    """Loop mode: the reporter, and with an ``enforcer`` (``--enforce``) the colocation side
    wired to it."""
    reporter: Reporter | FanOutReporter

    def hook() -> None:
        if agent.throttle is not None:
            agent.throttle.directives_arrived()

    if settings.reporter.fan_out:
        reporter = FanOutReporter(
            settings.reporter,
            metrics=metrics,
            clock=clock,
            on_directives=hook,
        )
    else:
        reporter = Reporter(
            settings.reporter,
            metrics=metrics,
            clock=clock,
            on_directives=hook,
        )
    if enforcer is not None:
        agent.throttle = BeThrottle(
            enforcer, clock, reporter.current_directives, enforcer.layout, metrics=metrics
        )
    return await run_loop(agent, reporter, random.Random(), metrics_at)


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--metrics-listen {text!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _check_token_files(args: argparse.Namespace) -> None:
    """Refuse a token file that is not there at start-up: a typo in the path would
    otherwise only show as a warning on every send. The file is still re-read on each
    send (projected tokens rotate), so one that goes away later is a failed send."""
    for flag, path in (
        ("--token-file", args.token_file),
        ("--kubelet-token-file", args.kubelet_token_file),
    ):
        if path is not None and not os.path.isfile(path):
            reason = "not a regular file" if os.path.exists(path) else "no such file"
            raise ConfigError(f"{flag} {path}: {reason}")


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def main(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
        if not args.once and not args.coordinator:
            raise ConfigError("--coordinator URL is required unless --once is given")
        if not 0 <= args.sample_window <= MAX_SAMPLE_WINDOW_S:  # NaN too
            raise ConfigError(
                f"--sample-window {args.sample_window}: expected 0 to {MAX_SAMPLE_WINDOW_S:g} s"
            )
        metrics_at = _host_port(args.metrics_listen) if args.metrics_listen else None
        _check_token_files(args)
    except (HostPathError, ConfigError) as e:
        print(f"stowage agent: error: {e}", file=sys.stderr)
        return 2
    clock, metrics = SystemClock(), AgentMetrics()
    agent = Agent(settings, clock, metrics)
    # Every start, whatever the flags: a predecessor killed mid-throttle left it in place.
    enforce = settings.enforcer.enabled and not args.once
    enforcer = recovery.restore_at_start(settings, clock, enforce=enforce)
    try:
        if args.once:
            report = asyncio.run(collect_once(agent, args.sample_window))
            write_report(report, args.output, sys.stdout.buffer)
            return 0
        return asyncio.run(_serve(agent, settings, clock, metrics, metrics_at, enforcer))
    except ConfigError as e:  # found on the event loop: TLS settings, a busy metrics port
        print(f"stowage agent: error: {e}", file=sys.stderr)
        return 2
    finally:
        if enforcer is not None:
            enforcer.close()
        agent.close()
