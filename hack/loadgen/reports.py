"""Load generator for the coordinator's report ingest: many simulated nodes, one endpoint.

    python -m hack.loadgen.reports --url http://127.0.0.1:PORT --nodes 10000 \\
        --seconds 10 --concurrency 64 [--token-file FILE | --node-tokens FILE.json]

Each simulated node sends what a GPU node's agent sends: every section filled, 8 GPUs
on NVSwitch, 2 NUMA nodes, ~30 pods (:func:`build_report`). Encoding a full report costs
far more than sending it, so the sections are encoded once per report variant and every
request only packs the fields that change (``node``, ``seq``, ``measured_at``) in front of
them (:class:`Bodies`); the bytes are exactly what :func:`common.codec.encode` produces
for the same report, which the tests check.

``--refresh N`` sends what agents with the same setting send once their pods stop
changing: every N-th report of a node whole, the others with ``unchanged`` pods and no
memory-contiguity detail (:mod:`agent.reportdelta`); every report carries each pod's
measured use (``pod_usage``), as agents' reports do. The default is the agent's own (30);
0 sends every report whole.

``--concurrency`` requests are in flight at any time, over that many keep-alive
connections of a lean HTTP/1.1 client (:mod:`hack.loadgen.http1`: it costs the machine
a fraction of what the server under test does); ``--processes`` splits them over several
client processes when one client core cannot keep up with the server. Prints one JSON
object: reports/s over the measured window, latency p50/p99 in milliseconds, and counts of
answers by HTTP status and of transport errors by kind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec
import psutil
from msgspec import structs

from agent.collectors.memfrag import COMPACTION_COUNTERS
from agent.reportdelta import ReportDelta
from agent.settings import ReporterSettings
from common import codec
from common.schema import (
    SCHEMA_VERSION,
    AllocatableSection,
    CgroupLimits,
    Compaction,
    CpuAllocatable,
    CpuUsage,
    GpuDevice,
    GpuSection,
    HugepagePool,
    KubeletSettings,
    KubepodsCgroup,
    MemfragSection,
    MemoryAllocatable,
    MemoryUsage,
    NodeContiguity,
    NodeReport,
    NumaNode,
    NumaSection,
    PodInfo,
    PodsSection,
    PodUsage,
    PsiGroup,
    PsiLine,
    PsiResource,
    PsiSection,
    Resources,
    UsageSection,
    ZoneFrag,
)
from hack.loadgen import http1

GIB: Final = 2**30
MIB: Final = 2**20
AGENT_VERSION: Final = "0.1.0"
VARIANTS: Final = 8
"""Distinct report bodies (utilisation, pod mix); node i sends variant i % VARIANTS."""
PATH: Final = "/v1/reports"
REQUEST_TIMEOUT_S: Final = 30.0
AGENT_REFRESH: Final = ReporterSettings().refresh_reports
"""Simulated nodes send what agents with default settings send."""
CONTENT_TYPE: Final = "application/msgpack"


def node_name(i: int) -> str:
    return f"gpu-node-{i:05d}"


# ------------------------------------------------------------------ a GPU node's report


def _psi_line(avg10: float, total_us: int, rate: float | None) -> PsiLine:
    return PsiLine(
        avg10_pct=avg10,
        avg60_pct=avg10 * 0.8,
        avg300_pct=avg10 * 0.6,
        total_us=total_us,
        rate_pct=rate,
    )


def _psi_group(path: str, load: float) -> PsiGroup:
    return PsiGroup(
        path=path,
        cpu=PsiResource(some=_psi_line(load, 91_000_000, load * 1.1), full=None),
        memory=PsiResource(
            some=_psi_line(load / 10, 1_200_000, load / 9),
            full=_psi_line(load / 20, 600_000, load / 18),
        ),
        io=PsiResource(
            some=_psi_line(load / 4, 33_000_000, load / 4),
            full=_psi_line(load / 8, 21_000_000, load / 8),
        ),
        irq=PsiResource(some=None, full=_psi_line(0.0, 12_000, 0.0)),
    )


def _psi(now: float, load: float) -> PsiSection:
    root = "/sys/fs/cgroup/kubepods.slice"
    return PsiSection(
        measured_at=now,
        interval_s=10.0,
        system=_psi_group("/proc/pressure", load),
        cgroups={
            "kubepods": _psi_group(root, load * 0.9),
            "burstable": _psi_group(f"{root}/kubepods-burstable.slice", load * 0.5),
            "besteffort": _psi_group(f"{root}/kubepods-besteffort.slice", load * 0.3),
        },
    )


def _memfrag(now: float, variant: int) -> MemfragSection:
    zones = []
    for numa, zone in ((0, "DMA"), (0, "DMA32"), (0, "Normal"), (1, "Normal")):
        scale = 1 if zone.startswith("DMA") else 4096 + variant * 64
        by_order = [4096 * scale * (11 - k) for k in range(11)]
        zones.append(
            ZoneFrag(
                node=numa,
                zone=zone,
                free_b=sum(by_order),
                free_b_by_order=by_order,
                free_b_ge_2mib=sum(by_order[9:]),
                free_b_ge_1gib=0,
                largest_block_b=4 * MIB,
                unusable_frac_by_order=[min(1.0, k / 10) for k in range(11)],
                low_watermark_b=64 * MIB if zone == "Normal" else MIB,
            )
        )
    nodes = [
        NodeContiguity(
            node=n,
            free_b=40 * GIB + variant * GIB,
            free_b_ge_2mib=30 * GIB + variant * GIB,
            free_b_ge_1gib=0,
            largest_block_b=4 * MIB,
            unusable_2mib_frac=0.25,
        )
        for n in (0, 1)
    ]
    return MemfragSection(
        measured_at=now,
        page_size_b=4096,
        order_2mib=9,
        order_1gib=18,
        zones=zones,
        nodes=nodes,
        hugepages=[
            HugepagePool(size_b=2 * MIB, node=None, total=1024, free=512, surplus=0, reserved=0),
            HugepagePool(size_b=2 * MIB, node=0, total=512, free=256, surplus=0),
            HugepagePool(size_b=2 * MIB, node=1, total=512, free=256, surplus=0),
            HugepagePool(size_b=GIB, node=None, total=0, free=0, surplus=0, reserved=0),
        ],
        thp_enabled="madvise",
        thp_defrag="madvise",
        compaction=Compaction(
            counters={c: 1000 * (i + 1) + variant for i, c in enumerate(COMPACTION_COUNTERS)},
            rates_per_s={c: 0.1 * i for i, c in enumerate(COMPACTION_COUNTERS)},
        ),
    )


def _allocatable(now: float) -> AllocatableSection:
    root = "/sys/fs/cgroup/kubepods.slice"
    kubepods = CgroupLimits(
        path=root,
        memory_limit_b=1900 * GIB,
        memory_current_b=800 * GIB,
        memory_working_set_b=700 * GIB,
        cpu_quota_m=None,
        cpu_weight=8000,
    )
    return AllocatableSection(
        measured_at=now,
        cpu=CpuAllocatable(
            capacity_m=224_000,
            cpus="0-223",
            kube_reserved_m=1000,
            system_reserved_m=1000,
            reserved_cpus_m=0,
            kubelet_allocatable_m=222_000,
            true_allocatable_m=221_500,
            limited_by="non-pod-usage",
        ),
        memory=MemoryAllocatable(
            capacity_b=2048 * GIB,
            hugepages_b=2 * GIB,
            kube_reserved_b=8 * GIB,
            system_reserved_b=8 * GIB,
            eviction_hard_b=100 * MIB,
            kubelet_allocatable_b=2030 * GIB,
            kubepods_limit_b=1900 * GIB,
            node_working_set_b=760 * GIB,
            pods_working_set_b=700 * GIB,
            non_pod_b=60 * GIB,
            true_allocatable_b=1900 * GIB,
            limited_by="kubepods-limit",
        ),
        kubelet=KubeletSettings(
            path="/var/lib/kubelet/config.yaml",
            cgroup_driver="systemd",
            cgroups_per_qos=True,
            enforce_node_allocatable=["pods"],
            cpu_manager_policy="static",
            memory_manager_policy="Static",
            topology_manager_policy="single-numa-node",
            topology_manager_scope="pod",
            reserved_system_cpus="0,112",
        ),
        cgroup=KubepodsCgroup(
            version=2,
            driver="systemd",
            kubepods=kubepods,
            qos={
                "burstable": structs.replace(kubepods, path=f"{root}/kubepods-burstable.slice"),
                "besteffort": structs.replace(
                    kubepods, path=f"{root}/kubepods-besteffort.slice", cpu_weight=1
                ),
            },
        ),
    )


def _numa(now: float) -> NumaSection:
    return NumaSection(
        measured_at=now,
        nodes=[
            NumaNode(
                node=n,
                cpus=f"{n * 56}-{n * 56 + 55},{112 + n * 56}-{112 + n * 56 + 55}",
                cpu_count=112,
                mem_total_b=1024 * GIB,
                mem_free_b=300 * GIB,
                mem_available_b=600 * GIB,
                distances=[10, 21] if n == 0 else [21, 10],
            )
            for n in (0, 1)
        ],
    )


def _gpus(now: float, variant: int, count: int) -> GpuSection:
    devices = [
        GpuDevice(
            index=i,
            uuid=f"GPU-{variant:04x}{i:04x}-1111-2222-3333-444455556666",
            name="NVIDIA H100 80GB HBM3",
            pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            numa_node=i // 4,
            mem_total_b=80 * GIB,
            mem_used_b=(i * 9 + variant) % 80 * GIB,
            util_gpu_pct=float((i * 13 + variant * 7) % 100),
            util_mem_pct=float((i * 7 + variant * 3) % 100),
            mig_enabled=False,
            mig_devices=[],
            ecc_enabled=True,
            ecc_uncorrected_volatile=0,
            retired_pages_pending=False,
            remapped_rows_pending=False,
            remapping_failed=False,
            nvlinks_active=18,
            xid_critical=0,
            last_xid=None,
            health="ok",
            health_reasons=[],
        )
        for i in range(count)
    ]
    return GpuSection(
        measured_at=now,
        driver_version="550.54.15",
        devices=devices,
        topology=[
            [0 if i == j else (40 if i // 4 == j // 4 else 50) for j in range(count)]
            for i in range(count)
        ],
        nvlinks=[[0 if i == j else 18 for j in range(count)] for i in range(count)],
    )


def _usage(now: float, load: float) -> UsageSection:
    return UsageSection(
        measured_at=now,
        cpu=CpuUsage(
            window_s=10.0, used_m=int(2240 * load), used_pct=load, iowait_pct=0.5, steal_pct=0.0
        ),
        memory=MemoryUsage(
            total_b=2048 * GIB,
            used_b=900 * GIB,
            working_set_b=760 * GIB,
            page_cache_b=300 * GIB,
            inactive_file_b=140 * GIB,
            available_b=1100 * GIB,
            shmem_b=4 * GIB,
            unevictable_b=0,
            swap_used_b=0,
        ),
    )


def _pods(now: float, count: int) -> PodsSection:
    pods = []
    for i in range(count):
        gpu = i % 4 == 0
        requests = Resources(
            cpu_m=8000 if gpu else 500 + 250 * (i % 8),
            mem_b=(64 if gpu else 2 + i % 6) * GIB,
            gpu=1 if gpu else 0,
            hugepages_b=0,
            extended={"rdma/hca_shared_devices_a": 1} if gpu else {},
        )
        pods.append(
            PodInfo(
                namespace="ml-training" if gpu else "batch",
                name=f"job-{i:03d}-worker-{i * 7919 % 100_000:05d}",
                uid=f"6d3c2f1e-{i:04x}-4000-8000-00000000{i:04x}",
                phase="Running",
                qos_class="Guaranteed" if gpu else "Burstable",
                priority=1000 if gpu else 0,
                priority_class="training-high" if gpu else None,
                requests=requests,
                limits=structs.replace(requests, cpu_m=requests.cpu_m * 2),
                labels={
                    "app.kubernetes.io/name": "trainer" if gpu else "etl",
                    "app.kubernetes.io/instance": f"run-{i // 4}",
                    "team": "research",
                    "stowage.io/qos": "latency" if gpu else "batch",
                },
            )
        )
    return PodsSection(measured_at=now, source="apiserver", pods=pods)


def _pod_usage(pods: PodsSection, load: float) -> dict[str, PodUsage]:
    """What an agent on a cgroup v2 node measures for each pod: CPU use near its request
    scaled by the node's load, and a stall share (avg10 and this cycle's rate) per pod."""
    usage = {}
    for i, pod in enumerate(pods.pods):
        stall = round(load * (0.4 if pod.qos_class == "Guaranteed" else 0.8) + i % 5, 2)
        usage[pod.uid] = PodUsage(
            cpu_m=int(pod.requests.cpu_m * load / 50) + 17 * i,
            cpu_some_avg10_pct=stall,
            cpu_some_rate_pct=round(stall * 1.1 + 0.37, 2),
        )
    return usage


def build_report(
    node: str,
    *,
    seq: int = 0,
    now: float = 1_767_225_600.0,
    variant: int = 0,
    gpus: int = 8,
    pods: int | None = None,
) -> NodeReport:
    """A full report of an 8-GPU, 2-NUMA node running ~30 pods with their measured use;
    ``variant`` changes the measurements and the pod count (28–35) without changing the
    shape. ``gpus`` and ``pods`` make a smaller node of the same kind (every fourth pod a
    GPU pod), where a test wants each device and pod in view."""
    load = 20.0 + 7.5 * variant
    running = _pods(now, 28 + variant % 8 if pods is None else pods)
    return NodeReport(
        schema_version=SCHEMA_VERSION,
        node=node,
        agent_version=AGENT_VERSION,
        seq=seq,
        measured_at=now,
        psi=_psi(now, load),
        memfrag=_memfrag(now, variant),
        allocatable=_allocatable(now),
        numa=_numa(now),
        gpus=_gpus(now, variant, gpus),
        usage=_usage(now, load),
        pods=running,
        pod_usage=_pod_usage(running, load),
    )


# ------------------------------------------------------------------- cheap re-encoding


class Bodies:
    """Request bodies for many nodes without encoding a report per request.

    A report encodes as a msgpack map in field order. Everything after ``measured_at``
    (the sections) is encoded once per variant; per node the header up to ``node`` is
    encoded once; per request only ``seq`` and ``measured_at`` are. With ``refresh`` N > 1,
    report ``seq`` is whole when N divides ``seq``, else what the agent's
    :class:`~agent.reportdelta.ReportDelta` sends between whole reports when nothing changed.
    """

    def __init__(
        self, nodes: Sequence[str], *, now: float = 1_767_225_600.0, refresh: int = 0
    ) -> None:
        self.nodes = list(nodes)
        self.refresh = refresh
        # Every map here has under 16 entries, so its msgpack header is one byte (fixmap).
        # Fields at their defaults are left off the wire, so the keys are read back from an
        # encoded report rather than taken from the struct's field list.
        keys = list(msgspec.msgpack.decode(codec.encode(build_report("x", now=now))))
        map_header = bytes([0x80 | len(keys)])
        self._sections: list[bytes] = []
        self._between: list[bytes] = []
        for v in range(VARIANTS):
            report = build_report("x", now=now, variant=v)
            delta = ReportDelta(refresh_reports=2)
            delta.delivered(report, report)
            between = delta.outgoing(report)
            for whole, out in ((report, self._sections), (between, self._between)):
                rest = {name: getattr(whole, name) for name in keys[5:]}
                out.append(codec.encode(rest)[1:])  # without its map header
        self._heads = [
            map_header
            + codec.encode(
                {"schema_version": SCHEMA_VERSION, "node": name, "agent_version": AGENT_VERSION}
            )[1:]
            for name in self.nodes
        ]
        self._seq_key = codec.encode("seq")
        self._at_key = codec.encode("measured_at")

    def body(self, i: int, seq: int, measured_at: float) -> bytes:
        """The encoded report of node ``i`` with this ``seq`` and ``measured_at``."""
        return b"".join(
            (
                self._heads[i],
                self._seq_key,
                codec.encode(seq),
                self._at_key,
                codec.encode(float(measured_at)),
                self._between[i % VARIANTS]
                if self.refresh > 1 and seq % self.refresh
                else self._sections[i % VARIANTS],
            )
        )


# ------------------------------------------------------------------------- the client


@dataclass
class Result:
    """What the client saw within the measured window."""

    seconds: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    server_cpu_s: float | None = None
    """CPU seconds the server process used within the window (``--server-pid``)."""


@dataclass(frozen=True)
class Plan:
    url: str
    nodes: int
    seconds: float = 10.0
    """Length of the measured window; ignored when ``requests`` is set."""
    concurrency: int = 64
    warmup_s: float = 1.0
    """Unmeasured lead-in: connections opened, caches warm."""
    requests: int | None = None
    """Send exactly this many requests (no warm-up), then stop: for tests."""
    token: str | None = None
    node_tokens: dict[str, str] | None = None
    server_pid: int | None = None
    start_at: float | None = None
    """Wall-clock time to start at, so several client processes share one window."""
    first: int = 0
    """This process's share of the nodes: node indices first, first + step, …"""
    step: int = 1
    now: float = 0.0
    """``measured_at`` of the first report (0: the current time)."""
    refresh: int = AGENT_REFRESH
    """See :class:`Bodies`."""


async def run_client(plan: Plan) -> Result:
    """Send reports of this process's share of the nodes; see :class:`Plan`."""
    indices = range(plan.first, plan.nodes, plan.step)
    names = [node_name(i) for i in indices]
    if not names:
        return Result()
    now = plan.now or time.time()
    bodies = Bodies(names, now=now, refresh=plan.refresh)
    url = urlsplit(plan.url)
    if url.scheme != "http" or url.hostname is None:
        raise ValueError(f"--url must be http://HOST:PORT, not {plan.url!r}")
    host, port = url.hostname, url.port or 80
    path = url.path.rstrip("/") + PATH
    prefixes: list[bytes] = []
    for name in names:
        h = {"Content-Type": CONTENT_TYPE}
        token = plan.node_tokens.get(name) if plan.node_tokens is not None else plan.token
        if token:
            h["Authorization"] = f"Bearer {token}"
        prefixes.append(http1.request_prefix("POST", path, url.netloc, h))
    result = Result()
    sent = 0
    loop = asyncio.get_running_loop()
    if plan.start_at is not None:
        await asyncio.sleep(max(0.0, plan.start_at - time.time()))
    start = loop.time()
    if plan.requests is not None:
        measure_from, end = start, float("inf")
    else:
        measure_from = start + plan.warmup_s
        end = measure_from + plan.seconds

    async def worker() -> None:
        nonlocal sent
        conn: http1.Http1Connection | None = None
        while True:
            n = sent
            if (plan.requests is not None and n >= plan.requests) or loop.time() >= end:
                break
            sent += 1
            i = n % len(names)
            body = bodies.body(i, n // len(names), now + n * 1e-3)
            data = http1.framed(prefixes[i], body)
            t0 = loop.time()
            status = kind = ""
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT_S):
                    if conn is None or conn.closed:
                        conn = await http1.connect(host, port)
                    status = str(await conn.request(data))
            except (OSError, TimeoutError, http1.ProtocolError) as e:
                kind = type(e).__name__
                if conn is not None:
                    conn.close()
                    conn = None
            t1 = loop.time()
            if t0 < measure_from or t1 > end:
                continue  # warm-up, or finished after the window closed
            if status:
                result.statuses[status] += 1
                result.latencies_s.append(t1 - t0)
            else:
                result.errors[kind] += 1
        if conn is not None:
            conn.close()

    async def sample_server() -> None:
        proc = psutil.Process(plan.server_pid)
        await asyncio.sleep(max(0.0, measure_from - loop.time()))
        before = _cpu_s(proc)
        await asyncio.sleep(max(0.0, end - loop.time()))
        result.server_cpu_s = _cpu_s(proc) - before

    sampler = None
    if plan.server_pid is not None and plan.requests is None:
        sampler = asyncio.create_task(sample_server())
    await asyncio.gather(*(worker() for _ in range(plan.concurrency)))
    if sampler is not None:
        await sampler
    result.seconds = plan.seconds if plan.requests is None else loop.time() - start
    return result


def _cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def _run_in_process(plan: Plan) -> Result:
    return asyncio.run(run_client(plan))


def run(plan: Plan, processes: int = 1) -> Result:
    """Run the plan in ``processes`` client processes (1: in this one) and merge results;
    the first process samples the server."""
    if processes <= 1:
        return asyncio.run(run_client(plan))
    now = plan.now or time.time()
    start_at = time.time() + 2.0 + plan.nodes / 20_000  # spawn and build bodies first
    plans = [
        replace(
            plan,
            concurrency=max(1, plan.concurrency // processes),
            requests=None if plan.requests is None else -(-plan.requests // processes),
            server_pid=plan.server_pid if p == 0 else None,
            start_at=start_at,
            first=p,
            step=processes,
            now=now,
        )
        for p in range(processes)
    ]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        parts = pool.map(_run_in_process, plans)
    merged = Result(seconds=max(part.seconds for part in parts))
    for part in parts:
        merged.latencies_s.extend(part.latencies_s)
        merged.statuses.update(part.statuses)
        merged.errors.update(part.errors)
    merged.server_cpu_s = parts[0].server_cpu_s
    return merged


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (NaN when there are none)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(len(sorted_values) * q / 100))
    return sorted_values[rank - 1]


def summary(result: Result) -> dict[str, Any]:
    """The JSON the command prints."""
    latencies = sorted(result.latencies_s)
    ok = result.statuses.get("200", 0)
    seconds = result.seconds or math.nan
    out: dict[str, Any] = {
        "seconds": round(result.seconds, 3),
        "answers": len(latencies),
        "reports_per_s": round(ok / seconds, 1),
        "answers_per_s": round(len(latencies) / seconds, 1),
        "p50_ms": round(percentile(latencies, 50) * 1000, 3),
        "p99_ms": round(percentile(latencies, 99) * 1000, 3),
        "statuses": dict(sorted(result.statuses.items())),
        "errors": dict(sorted(result.errors.items())),
    }
    if result.server_cpu_s is not None and latencies:
        out["server_cpu_s"] = round(result.server_cpu_s, 3)
        out["server_cpu_us_per_answer"] = round(result.server_cpu_s / len(latencies) * 1e6, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="coordinator base URL")
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured lead-in, seconds")
    parser.add_argument("--requests", type=int, help="send exactly this many, then stop")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight")
    parser.add_argument("--processes", type=int, default=1, help="client processes")
    parser.add_argument("--server-pid", type=int, help="also measure this process's CPU time")
    parser.add_argument(
        "--refresh",
        type=int,
        default=AGENT_REFRESH,
        metavar="N",
        help="every N-th report of a node whole, the others as agents send them between"
        f" (default: the agent's, {AGENT_REFRESH}; 0: every report whole)",
    )
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--token-file", type=Path, help="one bearer token for every node")
    auth.add_argument("--node-tokens", type=Path, help='JSON {"node": "token"} per node')
    args = parser.parse_args(argv)
    if min(args.nodes, args.concurrency, args.processes, args.requests or 1) < 1:
        parser.error("--nodes, --concurrency, --processes and --requests must be positive")
    if args.refresh < 0:
        parser.error("--refresh must not be negative")
    if args.seconds <= 0 or args.warmup < 0:
        parser.error("--seconds must be positive and --warmup not negative")
    token = None
    if args.token_file:
        token = args.token_file.read_text(encoding="utf-8").strip()
    node_tokens = None
    if args.node_tokens:
        node_tokens = json.loads(args.node_tokens.read_text(encoding="utf-8"))
    plan = Plan(
        url=args.url,
        nodes=args.nodes,
        seconds=args.seconds,
        concurrency=args.concurrency,
        warmup_s=args.warmup,
        requests=args.requests,
        token=token,
        node_tokens=node_tokens,
        server_pid=args.server_pid,
        refresh=args.refresh,
    )
    print(json.dumps(summary(run(plan, args.processes))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
