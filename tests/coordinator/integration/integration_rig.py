"""The real coordinator app against the real Kubernetes API emulator, over real HTTP.

* :class:`RecordingKubeApi` is the emulator with one extra middleware that records every
  request it answered (method, path, query, User-Agent, status, and the body of writes),
  can hold lists of a resource back until a test lets them through, counts the watches
  open right now, and answers 503 to a client cut off as by a network partition.
  Counting PATCH requests there counts what reached the API server, whatever the
  coordinator believes it sent.
* :class:`Coordinator` is one replica: ``make_app`` with its own Services, LiveCluster and
  metrics, a real ``kubernetes`` ApiClient (its User-Agent names the replica, so the
  emulator's log says which replica wrote what), served on 127.0.0.1.
* Reports are built here (:func:`node_report`) with the contiguity and pressure a test
  picks and go out as real msgpack POSTs with a bearer token the emulator's TokenReview
  vouches for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from common import annotations as ann
from common import codec
from common.clock import SystemClock
from common.schema import (
    SCHEMA_VERSION,
    Absent,
    MemfragSection,
    NodeContiguity,
    NodeReport,
    PsiGroup,
    PsiLine,
    PsiResource,
    PsiSection,
)
from coordinator import app as coordinator_app
from coordinator import auth, ingest
from coordinator.config import (
    CoordinatorSettings,
    IngestSettings,
    KubeSettings,
    LeaderSettings,
    PublisherSettings,
    SignalSettings,
)
from coordinator.kube.client import api_client
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.nodeview import NODE_VIEW
from coordinator.services import Services
from hack.kubeapi import KubeApi, errors
from hack.kubeapi.resources import LEASES, NODES
from tests.kit import eventually

GIB = 2**30
MIB = 2**20
NAMESPACE = "stowage-system"
LEASE = "stowage-coordinator"
AUDIENCE = "stowage-coordinator"
SHORT_LEADER = LeaderSettings(
    lease_name=LEASE, lease_duration_s=2.0, renew_deadline_s=1.5, retry_period_s=0.3
)
"""Leader timings scaled down from kube-scheduler's 15/10/2 s, keeping their order."""
PUBLISHER_TICK_S = 0.1
"""The publisher's loop period in these tests (``publisher.TICK_S``, 1 s in production)."""


# ------------------------------------------------------------------ the emulator


@dataclass(frozen=True, slots=True)
class Seen:
    """One request the emulator answered."""

    method: str
    path: str
    query: Mapping[str, str]
    agent: str
    status: int
    body: Any
    at: float  # monotonic, when the answer was ready


class RecordingKubeApi(KubeApi):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.seen: list[Seen] = []
        self.held: dict[str, asyncio.Event] = {}
        self.watching: dict[str, int] = {}
        self.cut_off: set[str] = set()
        """User-Agents whose requests fail with 503, as behind a network partition."""

    def app(self) -> web.Application:
        app = super().app()
        app.middlewares.insert(0, self._record)  # outermost: injected faults are recorded too
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        agent = request.headers.get("User-Agent", "")
        if agent in self.cut_off:
            status = errors.status(503, "ServiceUnavailable", "partitioned (test)")
            return web.json_response(status, status=503)
        watch = request.query.get("watch") in ("true", "1")
        body = None
        if request.method in ("PATCH", "PUT", "POST") and request.can_read_body:
            with contextlib.suppress(ValueError):
                body = json.loads(await request.read())
        if request.method == "GET" and not watch and request.path in self.held:
            await self.held[request.path].wait()
        if watch:
            self.watching[request.path] = self.watching.get(request.path, 0) + 1
        try:
            response = await handler(request)
        finally:
            if watch:
                self.watching[request.path] -= 1
        self.seen.append(
            Seen(
                request.method,
                request.path,
                dict(request.query),
                agent,
                response.status,
                body,
                time.monotonic(),
            )
        )
        return response

    def hold_lists(self, path: str) -> asyncio.Event:
        """Hold every list of ``path`` (not watches) until the returned event is set."""
        self.held[path] = asyncio.Event()
        return self.held[path]

    def patches(self, node: str) -> list[Seen]:
        """The PATCH requests to Node ``node`` the emulator accepted, in order."""
        path = f"/api/v1/nodes/{node}"
        return [s for s in self.seen if s.method == "PATCH" and s.path == path and s.status < 300]

    def annotations(self, node: str) -> dict[str, str]:
        found = self.store.get(NODES, "", node)
        return dict(found["metadata"].get("annotations") or {})

    def lease_holder(self) -> str | None:
        lease = self.store.find(LEASES, NAMESPACE, LEASE)
        return None if lease is None else lease["spec"].get("holderIdentity")

    def agent_token(self, node: str) -> str:
        """A projected token of the agent pod on ``node``, for the coordinator's audience."""
        token = f"token-{node}-{secrets.token_hex(8)}"
        self.add_token(
            token, node=node, pod=f"stowage-agent-{node}", namespace=NAMESPACE, audiences=[AUDIENCE]
        )
        return token


def watch_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("watch-")}


# ------------------------------------------------------------------ settings, reports


def settings(
    *,
    report_ttl_s: float = 30.0,
    heartbeat_s: float = 3600.0,
    change_pct: float = 5.0,
    leader: LeaderSettings = SHORT_LEADER,
) -> CoordinatorSettings:
    """Short timings: leader election in seconds, no heartbeat within a test."""
    return CoordinatorSettings(
        listen="127.0.0.1:8080",  # not used: tests serve on a free port
        signals=SignalSettings(report_ttl_s=report_ttl_s),
        ingest=IngestSettings(auth="tokenreview", audience=AUDIENCE),
        kube=KubeSettings(namespace=NAMESPACE),
        publisher=PublisherSettings(heartbeat_s=heartbeat_s, change_pct=change_pct),
        leader=leader,
    )


def node_report(
    node: str,
    *,
    free_2mib_b: int,
    seq: int = 1,
    cpu_pressure_pct: float | None = None,
    measured_at: float | None = None,
) -> NodeReport:
    """A report whose only signals are memory contiguity (all on NUMA node 0) and, when
    given, CPU pressure; every other section absent, as on a node without them."""
    now = time.time() if measured_at is None else measured_at
    psi: PsiSection | Absent = Absent("psi-unsupported")
    if cpu_pressure_pct is not None:
        line = PsiLine(
            avg10_pct=cpu_pressure_pct,
            avg60_pct=cpu_pressure_pct,
            avg300_pct=cpu_pressure_pct,
            total_us=1_000_000,
            rate_pct=cpu_pressure_pct,
        )
        psi = PsiSection(
            measured_at=now,
            interval_s=10.0,
            system=PsiGroup(
                path="/proc/pressure",
                cpu=PsiResource(some=line, full=None),
                memory=PsiResource(some=line, full=line),
                io=Absent("not measured"),
                irq=Absent("not measured"),
            ),
            cgroups=Absent("cgroup v1"),
        )
    memfrag = MemfragSection(
        measured_at=now,
        page_size_b=4096,
        order_2mib=9,
        order_1gib=18,
        zones=[],
        nodes=[
            NodeContiguity(
                node=0,
                free_b=free_2mib_b + 64 * MIB,
                free_b_ge_2mib=free_2mib_b,
                free_b_ge_1gib=0,
                largest_block_b=4 * MIB,
                unusable_2mib_frac=0.1,
            )
        ],
        hugepages=Absent("no hugetlbfs"),
        thp_enabled="madvise",
        thp_defrag="madvise",
        compaction=Absent("not measured"),
    )
    return NodeReport(
        schema_version=SCHEMA_VERSION,
        node=node,
        agent_version="test",
        seq=seq,
        measured_at=now,
        psi=psi,
        memfrag=memfrag,
        allocatable=Absent("disabled"),
        numa=Absent("disabled"),
        gpus=Absent("no-gpus"),
        usage=Absent("disabled"),
        pods=Absent("disabled"),
    )


def contiguity(annotations: Mapping[str, str]) -> str | None:
    """The ``free_2mib`` value of a ``stowage.io/contiguity`` annotation (None: no key)."""
    value = annotations.get(ann.CONTIGUITY)
    return None if value is None else ann.parse(value)[0].get("free_2mib")


# ------------------------------------------------------------------ a coordinator


class LeaderFlag(asyncio.Event):
    """The replica's "leading" flag, telling ``watchers`` of every change as it happens —
    so a test sees each transition in order instead of sampling the flag."""

    def __init__(self) -> None:
        super().__init__()
        self.watchers: list[Callable[[bool], None]] = []

    def set(self) -> None:
        if not self.is_set():
            super().set()
            for watcher in self.watchers:
                watcher(True)

    def clear(self) -> None:
        if self.is_set():
            super().clear()
            for watcher in self.watchers:
                watcher(False)


@dataclass
class Coordinator:
    """One coordinator replica, served on 127.0.0.1 against the emulator at ``api_url``."""

    name: str
    api_url: str
    settings: CoordinatorSettings
    session: aiohttp.ClientSession
    services: Services = field(init=False)
    url: str = ""
    debug_url: str = ""
    """The debug listener's (``/debug/*``, ``/ui``): :func:`coordinator.app.make_debug_app`."""
    stopped: bool = False

    def __post_init__(self) -> None:
        self.client = api_client(host=self.api_url)
        self.client.user_agent = self.agent
        metrics = CoordinatorMetrics()
        cluster = LiveCluster(self.settings, SystemClock(), metrics)
        self.services = Services(
            settings=self.settings,
            clock=cluster.clock,
            metrics=metrics,
            cluster=cluster,
            authenticator=auth.build_authenticator(self.settings, lambda: self.client),
            leader=LeaderFlag(),
        )
        self.app = coordinator_app.make_app(self.services, self.client)
        self.runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=5.0)
        debug = coordinator_app.make_debug_app(self.services, self.app[NODE_VIEW])
        self.debug_runner = web.AppRunner(debug, access_log=None, shutdown_timeout=5.0)

    @property
    def agent(self) -> str:
        """The User-Agent of this replica's Kubernetes client."""
        return f"stowage-test/{self.name}"

    @property
    def cluster(self) -> LiveCluster:
        return self.services.cluster

    @property
    def leading(self) -> bool:
        return self.services.leader.is_set()

    async def start(self) -> Coordinator:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        await self.debug_runner.setup()
        await web.TCPSite(self.debug_runner, "127.0.0.1", 0).start()
        host, port = self.debug_runner.addresses[0][:2]
        self.debug_url = f"http://{host}:{port}"
        return self

    async def stop(self) -> None:
        """A clean shutdown, as on SIGTERM: background tasks stop, the lease is released."""
        if not self.stopped:
            self.stopped = True
            await self.debug_runner.cleanup()
            await self.runner.cleanup()
            self.client.close()

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        value = self.services.metrics.registry.get_sample_value(name, dict(labels or {}))
        return 0.0 if value is None else value

    async def report(self, report: NodeReport | bytes, token: str | None) -> tuple[int, bytes]:
        """POST a report (a NodeReport is msgpack-encoded; bytes go as they are)."""
        data = codec.encode(report) if isinstance(report, NodeReport) else report
        headers = {"Content-Type": ingest.CONTENT_TYPE}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with self.session.post(
            self.url + ingest.REPORTS_PATH, data=data, headers=headers
        ) as response:
            return response.status, await response.read()

    async def get(self, path: str, **params: str) -> tuple[int, str]:
        async with self.session.get(self.url + path, params=params) as response:
            return response.status, await response.text()

    async def get_debug(self, path: str, **params: str) -> tuple[int, str]:
        """A GET on the debug listener (``/debug/*``, ``/ui``)."""
        async with self.session.get(self.debug_url + path, params=params) as response:
            return response.status, await response.text()

    async def post_json(self, path: str, body: Any) -> tuple[int, Any]:
        async with self.session.post(self.url + path, json=body) as response:
            return response.status, await response.json()

    async def scrape(self) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        """``/metrics`` parsed: sample name → sorted labels → value."""
        status, text = await self.get("/metrics")
        assert status == 200
        samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
        return samples


# ------------------------------------------------------------------ waiting, kubectl


async def publisher_ticks(coordinator: Coordinator, n: int = 3) -> None:
    """Wait until the leader's publisher has made ``n`` more passes over the nodes (at
    least ``n - 1`` of them wholly after this call), before checking it did nothing."""
    ticks = "stowage_publisher_ticks_total"
    target = coordinator.metric(ticks) + n
    await eventually(lambda: coordinator.metric(ticks) >= target, f"{n} publisher ticks")


KUBECTL = shutil.which("kubectl")


async def kubectl(server: str, home: Path, *args: str) -> str:
    """Run kubectl against ``server`` in a worker thread (the emulator answering it runs
    on this event loop), with a private HOME and cache so no kubeconfig is read."""
    assert KUBECTL is not None
    env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(home / "none")}
    command = [KUBECTL, "--server", server, "--cache-dir", str(home / "cache"), *args]
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
