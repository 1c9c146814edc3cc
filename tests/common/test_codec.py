"""The strict msgpack codec: round trips, and SchemaError with a field path for every bad input."""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from common import codec
from common.codec import MAX_REPORT_BYTES, decode_directives, decode_report, encode
from common.errors import SchemaError
from common.schema import (
    Absent,
    AllocatableSection,
    CgroupLimits,
    Compaction,
    CpuAllocatable,
    CpuUsage,
    Directives,
    GpuDevice,
    GpuSection,
    HugepagePool,
    KubeletSettings,
    KubepodsCgroup,
    MaxLen,
    MemfragSection,
    MemoryAllocatable,
    MemoryUsage,
    MigDevice,
    NodeContiguity,
    NodeReport,
    NumaNode,
    NumaSection,
    PodInfo,
    PodsSection,
    PsiGroup,
    PsiLine,
    PsiResource,
    PsiSection,
    Range,
    Resources,
    UsageSection,
    ZoneFrag,
)

NOW = 1_767_225_600.25  # 2026-01-01T00:00:00.25Z
GIB = 2**30
MIB = 2**20

# ---------------------------------------------------------------- a realistic report


def psi_line(avg10: float, total_us: int, rate: float | None = None) -> PsiLine:
    return PsiLine(
        avg10_pct=avg10, avg60_pct=avg10 / 2, avg300_pct=avg10 / 4, total_us=total_us, rate_pct=rate
    )


def make_psi() -> PsiSection:
    system = PsiGroup(
        path="/proc/pressure",
        cpu=PsiResource(some=psi_line(3.5, 1_234_567, 2.75), full=None),
        memory=PsiResource(some=psi_line(0.25, 98_765), full=psi_line(0.0, 4_321)),
        io=PsiResource(some=psi_line(12.0, 55_555_555, None), full=psi_line(9.5, 44_444_444)),
        irq=Absent("psi-irq-unsupported"),
    )
    burstable = PsiGroup(
        path="/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice",
        cpu=PsiResource(some=psi_line(1.0, 1000), full=psi_line(0.5, 500)),
        memory=Absent("memory.pressure-unreadable"),
        io=PsiResource(some=None, full=None),
        irq=Absent("psi-irq-unsupported"),
    )
    return PsiSection(
        measured_at=NOW,
        interval_s=10.0,
        system=system,
        cgroups={"burstable": burstable, "besteffort": Absent("cgroup-missing")},
    )


def make_memfrag() -> MemfragSection:
    normal = ZoneFrag(
        node=0,
        zone="Normal",
        free_b=3 * GIB,
        free_b_by_order=[4096 * n for n in (120, 80, 40, 20, 10, 5, 3, 2, 1, 1, 700)],
        free_b_ge_2mib=2 * GIB + 700 * 4 * MIB,
        free_b_ge_1gib=0,
        largest_block_b=4 * MIB,
        unusable_frac_by_order=[0.0, 0.01, 0.02, 0.04, 0.08, 0.1, 0.2, 0.25, 0.3, 0.5, 1.0],
        low_watermark_b=64 * MIB,
    )
    dma32 = dataclasses.replace(normal, zone="DMA32", free_b=GIB, low_watermark_b=None)
    return MemfragSection(
        measured_at=NOW,
        page_size_b=4096,
        order_2mib=9,
        order_1gib=18,
        zones=[dma32, normal],
        nodes=[
            NodeContiguity(
                node=0,
                free_b=4 * GIB,
                free_b_ge_2mib=3 * GIB,
                free_b_ge_1gib=0,
                largest_block_b=4 * MIB,
                unusable_2mib_frac=0.25,
            )
        ],
        hugepages=[
            HugepagePool(size_b=2 * MIB, node=None, total=512, free=256, surplus=0, reserved=16),
            HugepagePool(size_b=GIB, node=0, total=4, free=4, surplus=0),
        ],
        thp_enabled="madvise",
        thp_defrag=None,
        compaction=Compaction(
            counters={"compact_stall": 17, "compact_fail": 3, "thp_fault_alloc": 1_000_000},
            rates_per_s={"compact_stall": 0.1, "compact_fail": 0.0},
        ),
    )


def make_allocatable() -> AllocatableSection:
    kubepods = CgroupLimits(
        path="/sys/fs/cgroup/kubepods.slice",
        memory_limit_b=60 * GIB,
        memory_current_b=20 * GIB,
        memory_working_set_b=18 * GIB,
        cpu_quota_m=None,
        cpu_weight=2000,
    )
    return AllocatableSection(
        measured_at=NOW,
        cpu=CpuAllocatable(
            capacity_m=32_000,
            cpus="0-31",
            kube_reserved_m=500,
            system_reserved_m=500,
            reserved_cpus_m=0,
            kubelet_allocatable_m=31_000,
            true_allocatable_m=30_750,
            limited_by="non-pod-usage",
        ),
        memory=MemoryAllocatable(
            capacity_b=64 * GIB,
            hugepages_b=5 * GIB,
            kube_reserved_b=GIB,
            system_reserved_b=GIB,
            eviction_hard_b=100 * MIB,
            kubelet_allocatable_b=57 * GIB,
            kubepods_limit_b=60 * GIB,
            node_working_set_b=24 * GIB,
            pods_working_set_b=18 * GIB,
            non_pod_b=6 * GIB,
            true_allocatable_b=52 * GIB,
            limited_by="kubelet",
        ),
        kubelet=KubeletSettings(
            path="/var/lib/kubelet/config.yaml",
            cgroup_driver="systemd",
            cgroups_per_qos=True,
            enforce_node_allocatable=["pods"],
            cpu_manager_policy="static",
            memory_manager_policy=None,
            topology_manager_policy="single-numa-node",
            topology_manager_scope="container",
            reserved_system_cpus="0,16",
        ),
        cgroup=KubepodsCgroup(
            version=2,
            driver="systemd",
            kubepods=kubepods,
            qos={
                "burstable": dataclasses.replace(
                    kubepods,
                    path="/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice",
                    memory_limit_b=None,
                    cpu_weight=None,
                ),
                "besteffort": Absent("cgroup-missing"),
            },
        ),
    )


def make_numa() -> NumaSection:
    return NumaSection(
        measured_at=NOW,
        nodes=[
            NumaNode(
                node=0,
                cpus="0-15",
                cpu_count=16,
                mem_total_b=32 * GIB,
                mem_free_b=10 * GIB,
                mem_available_b=20 * GIB,
                distances=[10, 21],
            ),
            NumaNode(
                node=1,
                cpus="16-31",
                cpu_count=16,
                mem_total_b=32 * GIB,
                mem_free_b=12 * GIB,
                mem_available_b=22 * GIB,
                distances=[21, 10],
            ),
        ],
    )


def gpu(index: int, **changes: Any) -> GpuDevice:
    base = GpuDevice(
        index=index,
        uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
        name="NVIDIA H100 80GB HBM3",
        pci_bus_id=f"00000000:{0x18 + index:02X}:00.0",
        numa_node=index // 2,
        mem_total_b=80 * GIB,
        mem_used_b=GIB // 2,
        util_gpu_pct=37.5,
        util_mem_pct=12.0,
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
    return dataclasses.replace(base, **changes)


def make_gpus() -> GpuSection:
    return GpuSection(
        measured_at=NOW,
        driver_version="550.54.15",
        devices=[
            gpu(0),
            gpu(
                1,
                mig_enabled=True,
                util_gpu_pct=None,
                util_mem_pct=None,
                mig_devices=[
                    MigDevice(
                        uuid="MIG-11111111-2222-3333-4444-555555555555",
                        gpu_instance_id=1,
                        compute_instance_id=0,
                        mem_total_b=10 * GIB,
                    ),
                    MigDevice(
                        uuid="MIG-66666666-7777-8888-9999-000000000000",
                        gpu_instance_id=None,
                        compute_instance_id=None,
                        mem_total_b=None,
                    ),
                ],
            ),
            gpu(
                2,
                health="degraded",
                health_reasons=["remapped-rows-pending"],
                remapped_rows_pending=True,
                last_xid=94,
                ecc_enabled=None,
                ecc_uncorrected_volatile=None,
                nvlinks_active=None,
                numa_node=None,
            ),
        ],
        topology=[[0, 20, 50], [20, 0, None], [50, None, 0]],
        nvlinks=[[0, 18, 0], [18, 0, 0], [0, 0, 0]],
    )


def make_usage() -> UsageSection:
    return UsageSection(
        measured_at=NOW,
        cpu=CpuUsage(
            window_s=10.0, used_m=12_345, used_pct=38.578125, iowait_pct=0.5, steal_pct=0.0
        ),
        memory=MemoryUsage(
            total_b=64 * GIB,
            used_b=30 * GIB,
            working_set_b=24 * GIB,
            page_cache_b=8 * GIB,
            inactive_file_b=6 * GIB,
            available_b=34 * GIB,
            shmem_b=GIB // 4,
            unevictable_b=0,
            swap_used_b=0,
        ),
    )


def make_pods() -> PodsSection:
    requests = Resources(
        cpu_m=4000, mem_b=16 * GIB, gpu=1, hugepages_b=0, extended={"example.com/foo": 2}
    )
    limits = Resources(cpu_m=8000, mem_b=16 * GIB, gpu=1, hugepages_b=0)
    return PodsSection(
        measured_at=NOW,
        source="apiserver",
        pods=[
            PodInfo(
                namespace="ml",
                name="train-0",
                uid="6d3c2f1e-0000-4000-8000-000000000001",
                phase="Running",
                qos_class="Burstable",
                priority=1000,
                priority_class="batch-high",
                requests=requests,
                limits=limits,
                labels={"app": "train", "app.kubernetes.io/part-of": "llm", "team": "ünïcødé ✓"},
            ),
            PodInfo(
                namespace="kube-system",
                name="node-exporter-x7k2p",
                uid="6d3c2f1e-0000-4000-8000-000000000002",
                phase="Running",
                qos_class="BestEffort",
                priority=-(2**31),
                priority_class=None,
                requests=Resources(cpu_m=0, mem_b=0, gpu=0, hugepages_b=0),
                limits=Resources(cpu_m=0, mem_b=0, gpu=0, hugepages_b=0),
                labels={},
            ),
        ],
    )


def make_report() -> NodeReport:
    """Every section present, with Absent nested inside several of them."""
    return NodeReport(
        schema_version=1,
        node="gpu-node-17.example.internal",
        agent_version="0.1.0",
        seq=42,
        measured_at=NOW,
        psi=make_psi(),
        memfrag=make_memfrag(),
        allocatable=make_allocatable(),
        numa=make_numa(),
        gpus=make_gpus(),
        usage=make_usage(),
        pods=make_pods(),
    )


def make_sparse_report() -> NodeReport:
    """Top-level sections Absent, and None wherever the schema allows it."""
    return NodeReport(
        schema_version=1,
        node="cpu-node-1",
        agent_version="0.1.0",
        seq=0,
        measured_at=0.0,
        psi=Absent("psi-unsupported"),
        memfrag=Absent("proc-buddyinfo-unreadable"),
        allocatable=Absent("kubelet-config-missing"),
        numa=Absent("no-numa"),
        gpus=Absent("nvml-unavailable"),
        usage=UsageSection(measured_at=0.0, cpu=Absent("first-sample"), memory=make_usage().memory),
        pods=Absent("apiserver-unreachable"),
    )


def plain_report() -> dict[str, Any]:
    """The wire form of make_report(), as plain data read back from msgpack."""
    data: dict[str, Any] = msgpack.unpackb(encode(make_report()), raw=False)
    return data


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("report", [make_report(), make_sparse_report()], ids=["full", "sparse"])
def test_report_round_trip(report: NodeReport) -> None:
    payload = encode(report)
    assert len(payload) < MAX_REPORT_BYTES
    assert decode_report(payload) == report
    assert codec.validate(report) == report


def test_wire_form_of_absent_and_sections() -> None:
    data = plain_report()
    assert data["schema_version"] == 1
    assert data["psi"]["system"]["irq"] == {"absent": "psi-irq-unsupported"}
    assert data["psi"]["cgroups"]["besteffort"] == {"absent": "cgroup-missing"}
    assert data["psi"]["system"]["cpu"]["full"] is None
    assert data["gpus"]["topology"][1][2] is None
    assert data["pods"]["pods"][0]["labels"]["team"] == "ünïcødé ✓"
    assert data["pods"]["pods"][1]["limits"]["extended"] == {}
    sparse = msgpack.unpackb(encode(make_sparse_report()), raw=False)
    assert sparse["gpus"] == {"absent": "nvml-unavailable"}


def test_decoded_report_is_typed() -> None:
    report = decode_report(encode(make_report()))
    assert isinstance(report.psi, PsiSection)
    assert isinstance(report.psi.system.irq, Absent)
    assert isinstance(report.gpus, GpuSection)
    assert isinstance(report.gpus.devices[1].mig_devices[0], MigDevice)
    assert isinstance(report.pods, PodsSection)
    assert report.pods.pods[0].requests.extended == {"example.com/foo": 2}


def test_float_field_accepts_an_integer() -> None:
    data = plain_report()
    data["measured_at"] = 1_767_225_600
    data["usage"]["cpu"]["used_pct"] = 50
    report = decode_report(msgpack.packb(data))
    assert report.measured_at == 1_767_225_600.0
    assert type(report.measured_at) is float
    assert isinstance(report.usage, UsageSection)
    assert isinstance(report.usage.cpu, CpuUsage)
    assert type(report.usage.cpu.used_pct) is float


def test_optional_field_with_default_may_be_omitted() -> None:
    data = plain_report()
    del data["pods"]["pods"][0]["limits"]["extended"]
    del data["psi"]["system"]["cpu"]["some"]["rate_pct"]
    report = decode_report(msgpack.packb(data))
    assert isinstance(report.pods, PodsSection)
    assert report.pods.pods[0].limits.extended == {}
    assert isinstance(report.psi, PsiSection)
    assert isinstance(report.psi.system.cpu, PsiResource)
    assert report.psi.system.cpu.some is not None
    assert report.psi.system.cpu.some.rate_pct is None


def test_bounds_are_inclusive() -> None:
    data = plain_report()
    data["usage"]["memory"]["total_b"] = 2**50
    data["usage"]["cpu"]["used_pct"] = 100.0
    data["usage"]["cpu"]["steal_pct"] = 0
    data["pods"]["pods"][0]["priority"] = 2**31 - 1
    data["node"] = "n" * 253
    report = decode_report(msgpack.packb(data))
    assert isinstance(report.usage, UsageSection)
    assert report.usage.memory.total_b == 2**50


# ------------------------------------------------ a strategy for valid reports


def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    """Values of a schema type, inside its Annotated Range and MaxLen bounds."""
    bounds: Range | None = None
    max_len: int | None = None
    if typing.get_origin(tp) is typing.Annotated:
        tp, *meta = typing.get_args(tp)
        for m in meta:
            if isinstance(m, Range):
                bounds = m
            elif isinstance(m, MaxLen):
                max_len = m.n
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([strategy_for(option) for option in typing.get_args(tp)])
    if origin is list:
        (item,) = typing.get_args(tp)
        return st.lists(strategy_for(item), max_size=min(max_len or 3, 3))
    if origin is dict:
        key, value = typing.get_args(tp)
        return st.dictionaries(
            strategy_for(key), strategy_for(value), max_size=min(max_len or 3, 3)
        )
    if tp is Absent:
        return st.builds(Absent, st.text(st.characters(codec="utf-8"), min_size=1, max_size=20))
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        return st.builds(
            tp, **{f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(tp)}
        )
    if tp is bool:
        return st.booleans()
    if tp is int:
        lo, hi = (int(bounds.lo), int(bounds.hi)) if bounds else (-(2**63), 2**63 - 1)
        return st.integers(lo, hi)
    if tp is float:
        lo, hi = (bounds.lo, bounds.hi) if bounds else (None, None)
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    if tp is str:
        return st.text(st.characters(codec="utf-8"), max_size=min(max_len or 20, 20))
    if tp is type(None):
        return st.none()
    raise TypeError(f"no strategy for {tp!r}")


reports = strategy_for(NodeReport)

SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=60, suppress_health_check=SLOW_DATA, deadline=None)
@given(reports)
def test_generated_reports_round_trip(report: NodeReport) -> None:
    assert decode_report(encode(report)) == report


@settings(max_examples=100)
@given(strategy_for(Directives))
def test_generated_directives_round_trip(directives: Directives) -> None:
    assert decode_directives(encode(directives)) == directives


# ---------------------------------------------------------------- directives


DIRECTIVES = Directives(
    schema_version=1, node="gpu-node-17", issued_at=NOW, ttl_s=30.0, be_cpu_quota_m=2500
)


def test_directives_round_trip_and_wire_form() -> None:
    payload = encode(DIRECTIVES)
    assert msgpack.unpackb(payload) == {
        "schema_version": 1,
        "node": "gpu-node-17",
        "issued_at": NOW,
        "ttl_s": 30.0,
        "be_cpu_quota_m": 2500,
    }
    assert decode_directives(payload) == DIRECTIVES
    unthrottled = dataclasses.replace(DIRECTIVES, be_cpu_quota_m=None)
    assert decode_directives(encode(unthrottled)) == unthrottled
    without_quota = {"schema_version": 1, "node": "n", "issued_at": NOW, "ttl_s": 5}
    assert decode_directives(msgpack.packb(without_quota)).be_cpu_quota_m is None


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"schema_version": 2}, "schema_version: unsupported version 2"),
        ({"schema_version": None}, "schema_version: unsupported version None"),
        ({"node": None}, "node: expected a string"),
        ({"node": "n" * 254}, "node: string of 254 chars exceeds 253"),
        ({"ttl_s": -1.0}, "ttl_s: -1.0 is outside"),
        ({"ttl_s": math.nan}, "ttl_s: nan is not a finite number"),
        ({"issued_at": "now"}, "issued_at: expected a number, got str"),
        ({"be_cpu_quota_m": "2500m"}, "be_cpu_quota_m: expected an integer, got str"),
        ({"be_cpu_quota_m": 2500.0}, "be_cpu_quota_m: expected an integer, got float"),
        ({"be_cpu_quota_m": -1}, "be_cpu_quota_m: -1 is outside"),
        ({"be_cpu_quota_m": {"absent": "x"}}, "be_cpu_quota_m: expected an integer, got dict"),
        ({"extra": 1}, "<root>: unknown field 'extra'"),
    ],
)
def test_directives_rejected(change: dict[str, Any], fragment: str) -> None:
    data = {**dataclasses.asdict(DIRECTIVES), **change}
    with pytest.raises(SchemaError) as info:
        decode_directives(msgpack.packb(data))
    assert fragment in str(info.value)


def test_directives_missing_field_and_size_limit() -> None:
    data = dataclasses.asdict(DIRECTIVES)
    del data["ttl_s"]
    with pytest.raises(SchemaError, match="^ttl_s: missing$"):
        decode_directives(msgpack.packb(data))
    with pytest.raises(SchemaError, match="exceeds the 65536-byte limit"):
        decode_directives(msgpack.packb({**dataclasses.asdict(DIRECTIVES), "pad": "x" * 65536}))


def test_directives_are_not_a_report() -> None:
    with pytest.raises(SchemaError, match="missing|unknown field"):
        decode_report(encode(DIRECTIVES))
    with pytest.raises(SchemaError, match="unknown field"):
        decode_directives(encode(make_sparse_report()))


# ---------------------------------------------------------------- rejections


def set_at(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = value


def del_at(data: Any, path: tuple[Any, ...]) -> None:
    for step in path[:-1]:
        data = data[step]
    del data[path[-1]]


def rejection(data: Any) -> str:
    """The SchemaError message decoding ``data`` as a report gives (fails if it decodes)."""
    with pytest.raises(SchemaError) as info:
        decode_report(msgpack.packb(data, use_bin_type=True))
    return str(info.value)


@pytest.mark.parametrize(
    ("version", "fragment"),
    [
        (2, "unsupported version 2"),
        (0, "unsupported version 0"),
        ("1", "unsupported version '1'"),
        (True, "unsupported version True"),
        (1.5, "unsupported version 1.5"),
        (-1, "unsupported version -1"),
        ([1], "unsupported version [1]"),
    ],
)
def test_unknown_schema_version(version: Any, fragment: str) -> None:
    data = plain_report()
    data["schema_version"] = version
    message = rejection(data)
    assert message.startswith("schema_version: ")
    assert fragment in message
    assert "this build reads 1" in message


def test_unknown_schema_version_is_reported_before_unknown_fields() -> None:
    data = plain_report()
    data["schema_version"] = 2
    data["field_from_the_future"] = {"x": 1}
    assert "unsupported version 2" in rejection(data)


def test_missing_schema_version() -> None:
    data = plain_report()
    del data["schema_version"]
    assert rejection(data) == "schema_version: missing"


def test_float_schema_version_equal_to_one_is_still_refused() -> None:
    data = plain_report()
    data["schema_version"] = 1.0
    assert rejection(data) == "schema_version: expected an integer, got float"


BAD_VALUES = [
    # wrong types
    (("seq",), "42", "seq: expected an integer, got str"),
    (("seq",), 3.0, "seq: expected an integer, got float"),
    (("seq",), True, "seq: expected an integer, got bool"),
    (("seq",), None, "seq: expected an integer, got nil"),
    (("node",), 17, "node: expected a string, got int"),
    (("measured_at",), "2026-01-01", "measured_at: expected a number, got str"),
    (("measured_at",), False, "measured_at: expected a number, got bool"),
    (("pods", "pods", 0, "labels"), [["app", "train"]], "pods.pods[0].labels: expected a map"),
    (("pods", "pods"), {"0": {}}, "pods.pods: expected a list, got dict"),
    (("psi", "system"), [], "psi.system: expected a map, got list"),
    (("psi", "system"), None, "psi.system: expected a map, got nil"),
    (
        ("allocatable", "kubelet", "cgroups_per_qos"),
        1,
        "allocatable.kubelet.cgroups_per_qos: expected a boolean, got int",
    ),
    (
        ("gpus", "devices", 0, "mig_enabled"),
        "false",
        "gpus.devices[0].mig_enabled: expected a boolean, got str",
    ),
    (("gpus", "topology", 0, 1), 20.0, "gpus.topology[0][1]: expected an integer, got float"),
    (("pods", "pods", 0, "labels", "app"), 7, "pods.pods[0].labels['app']: expected a string"),
    (
        ("memfrag", "compaction", "counters", "compact_stall"),
        -1,
        "memfrag.compaction.counters['compact_stall']: -1 is outside",
    ),
    (("node",), b"gpu-node", "malformed msgpack: 8 exceeds max_bin_len(0)"),
    (("node",), b"", "node: expected a string, got bytes"),
    # not finite
    (("measured_at",), math.nan, "measured_at: nan is not a finite number"),
    (("usage", "cpu", "used_pct"), math.inf, "usage.cpu.used_pct: inf is not a finite number"),
    (
        ("gpus", "devices", 0, "util_gpu_pct"),
        -math.inf,
        "gpus.devices[0].util_gpu_pct: -inf is not a finite number",
    ),
    (
        ("psi", "system", "cpu", "some", "avg10_pct"),
        math.nan,
        "psi.system.cpu.some.avg10_pct: nan is not a finite number",
    ),
    (
        ("memfrag", "zones", 1, "unusable_frac_by_order", 3),
        math.nan,
        "memfrag.zones[1].unusable_frac_by_order[3]: nan is not a finite number",
    ),
    (
        ("memfrag", "compaction", "rates_per_s", "compact_stall"),
        math.inf,
        "memfrag.compaction.rates_per_s['compact_stall']: inf is not a finite number",
    ),
    # out of range
    (("usage", "memory", "total_b"), -1, "usage.memory.total_b: -1 is outside"),
    (
        ("usage", "memory", "total_b"),
        2**50 + 1,
        "usage.memory.total_b: 1125899906842625 is outside",
    ),
    (("memfrag", "zones", 0, "free_b_by_order", 2), 2**63, "memfrag.zones[0].free_b_by_order[2]: "),
    (("usage", "cpu", "used_pct"), 100.5, "usage.cpu.used_pct: 100.5 is outside"),
    (("usage", "cpu", "iowait_pct"), -0.5, "usage.cpu.iowait_pct: -0.5 is outside"),
    (
        ("memfrag", "nodes", 0, "unusable_2mib_frac"),
        1.01,
        "memfrag.nodes[0].unusable_2mib_frac: 1.01 is outside",
    ),
    (("measured_at",), 2.0**35, "measured_at: "),
    (("measured_at",), -1.0, "measured_at: -1.0 is outside"),
    (("seq",), -1, "seq: -1 is outside"),
    (("seq",), 2**64 - 1, "seq: 18446744073709551615 is outside"),
    (("pods", "pods", 0, "priority"), 2**31, "pods.pods[0].priority: 2147483648 is outside"),
    (("allocatable", "cgroup", "version"), 3, "allocatable.cgroup.version: 3 is outside"),
    (
        ("allocatable", "cgroup", "kubepods", "cpu_weight"),
        0,
        "allocatable.cgroup.kubepods.cpu_weight: 0 is outside",
    ),
    (("allocatable", "cpu", "capacity_m"), 100_000_001, "allocatable.cpu.capacity_m: "),
    (("gpus", "nvlinks", 0, 1), 65, "gpus.nvlinks[0][1]: 65 is outside"),
    (("numa", "nodes", 0, "distances", 1), 256, "numa.nodes[0].distances[1]: 256 is outside"),
    # strings and lists over their MaxLen
    (("node",), "n" * 254, "node: string of 254 chars exceeds 253"),
    (
        ("pods", "pods", 0, "labels", "team"),
        "x" * 4097,
        "pods.pods[0].labels['team']: string of 4097 chars exceeds 4096",
    ),
    (("pods", "pods", 0, "labels"), {"k" * 254: "v"}, "pods.pods[0].labels.<key>: string of 254"),
    (
        ("gpus", "devices", 0, "health_reasons"),
        ["xid-79"] * 33,
        "gpus.devices[0].health_reasons: list of 33 items exceeds 32",
    ),
    (
        ("allocatable", "kubelet", "enforce_node_allocatable"),
        ["pods"] * 9,
        "allocatable.kubelet.enforce_node_allocatable: list of 9 items exceeds 8",
    ),
    (
        ("numa", "nodes", 0, "distances"),
        [10] * 1025,
        "numa.nodes[0].distances: list of 1025 items exceeds 1024",
    ),
    (("gpus", "topology", 0), [0] * 65, "gpus.topology[0]: list of 65 items exceeds 64"),
    (
        ("pods", "pods", 0, "labels"),
        {f"k{i}": "v" for i in range(65)},
        "pods.pods[0].labels: map of 65 entries exceeds 64",
    ),
    (
        ("psi", "cgroups"),
        {f"g{i}": {"absent": "x"} for i in range(17)},
        "psi.cgroups: map of 17 entries exceeds 16",
    ),
    # Absent: empty reason, non-string reason, extra keys, overlong reason
    (("psi",), {"absent": ""}, "psi.absent: expected a non-empty reason string"),
    (("psi", "system", "irq"), {"absent": ""}, "psi.system.irq.absent: expected a non-empty"),
    (("psi", "cgroups", "besteffort"), {"absent": ""}, "psi.cgroups['besteffort'].absent: "),
    (("psi",), {"absent": "x" * 4097}, "psi.absent: expected a non-empty reason string"),
    (("psi",), {"absent": "psi-unsupported", "since": 3}, "psi: unknown field 'absent'"),
    (("gpus",), {"absent": 5}, "gpus: unknown field 'absent'"),
    (("gpus",), {"absent": None}, "gpus: unknown field 'absent'"),
    (("gpus",), {}, "gpus.measured_at: missing"),
    (("numa", "nodes", 0), {"absent": "offline"}, "numa.nodes[0]: unknown field 'absent'"),
    (("usage", "memory"), {"absent": "x"}, "usage.memory: unknown field 'absent'"),
    (("node",), {"absent": "x"}, "node: expected a string, got dict"),
    # extension types
    (("seq",), msgpack.ExtType(5, b"\x00"), "extension type 5 is not allowed"),
    (("pods", "pods", 0, "labels", "app"), msgpack.ExtType(127, b""), "extension type 127"),
    (
        ("measured_at",),
        msgpack.Timestamp(1_767_225_600, 0),
        "measured_at: expected a number, got Timestamp",
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    BAD_VALUES,
    ids=[f"{'.'.join(map(str, p))}={v!r:.24}" for p, v, _ in BAD_VALUES],
)
def test_bad_value_rejected_with_path(path: tuple[Any, ...], value: Any, fragment: str) -> None:
    data = plain_report()
    set_at(data, path, value)
    assert fragment in rejection(data)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (("node",), "node: missing"),
        (("psi",), "psi: missing"),
        (("numa", "nodes", 0, "cpus"), "numa.nodes[0].cpus: missing"),
        (("psi", "system", "cpu", "full"), "psi.system.cpu.full: missing"),
        (
            ("gpus", "devices", 1, "mig_devices", 0, "uuid"),
            "gpus.devices[1].mig_devices[0].uuid: missing",
        ),
        (("pods", "pods", 0, "requests", "cpu_m"), "pods.pods[0].requests.cpu_m: missing"),
    ],
)
def test_missing_required_field(path: tuple[Any, ...], message: str) -> None:
    data = plain_report()
    del_at(data, path)
    assert rejection(data) == message


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ((), "<root>: unknown field 'hostname'"),
        (("psi", "system"), "psi.system: unknown field 'hostname'"),
        (("gpus", "devices", 2), "gpus.devices[2]: unknown field 'hostname'"),
        (("pods", "pods", 1, "limits"), "pods.pods[1].limits: unknown field 'hostname'"),
    ],
)
def test_unknown_field(path: tuple[Any, ...], message: str) -> None:
    data = plain_report()
    target: Any = data
    for step in path:
        target = target[step]
    target["hostname"] = "x"
    assert rejection(data) == message


def test_non_string_map_keys() -> None:
    for path in [(), ("pods", "pods", 0, "labels"), ("memfrag", "compaction", "counters")]:
        data = plain_report()
        target: Any = data
        for step in path:
            target = target[step]
        target[7] = "x"
        assert "malformed msgpack" in rejection(data)


def test_non_string_map_keys_in_plain_data() -> None:
    data = plain_report()
    data["pods"]["pods"][0]["labels"][7] = "x"
    with pytest.raises(SchemaError, match=r"pods\.pods\[0\]\.labels\.<key>: expected a string"):
        codec.from_plain(NodeReport, data)
    data = plain_report()
    data[("tuple", "key")] = 1
    with pytest.raises(SchemaError, match="<root>: unknown field"):
        codec.from_plain(NodeReport, data)


def test_empty_binary_map_key() -> None:
    # msgpack allows a bin map key; max_bin_len=0 still lets an empty one through.
    data = plain_report()
    data["pods"]["pods"][0]["labels"][b""] = "x"
    assert "pods.pods[0].labels.<key>: expected a string, got bytes" in rejection(data)
    data = plain_report()
    data[b""] = 1
    assert rejection(data).startswith("<root>: unknown field")


def test_oversized_payload() -> None:
    data = plain_report()
    data["node"] = "n" * MAX_REPORT_BYTES
    payload = msgpack.packb(data)
    with pytest.raises(SchemaError, match=f"exceeds the {MAX_REPORT_BYTES}-byte limit"):
        decode_report(payload)
    with pytest.raises(SchemaError, match="exceeds the 1048576-byte limit"):
        decode_report(b"\x00" * (MAX_REPORT_BYTES + 1))
    with pytest.raises(SchemaError, match="exceeds the 100-byte limit"):
        decode_report(encode(make_report()), max_bytes=100)


def test_string_longer_than_the_msgpack_limit() -> None:
    data = plain_report()
    data["psi"]["system"]["path"] = "p" * (2**16 + 1)
    assert rejection(data).startswith("malformed msgpack")


def test_every_truncation_is_rejected() -> None:
    payload = encode(make_report())
    assert len(payload) > 1000
    for end in range(len(payload)):
        with pytest.raises(SchemaError):
            decode_report(payload[:end])


def test_trailing_bytes_are_rejected() -> None:
    with pytest.raises(SchemaError, match="malformed msgpack"):
        decode_report(encode(make_report()) + b"\xc0")


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xc1",  # never used
        b"\xff\xff\xff\xff",
        b"\xdf\xff\xff\xff\xff",  # a map claiming 2^32-1 entries
        b"\xdd\xff\xff\xff\xff",  # an array claiming 2^32-1 items
        b"\xdb\xff\xff\xff\xff",  # a str claiming 2^32-1 bytes
        b"\xa3\xff\xfe\xfd",  # a str that is not UTF-8
        b"\xc4\x03abc",  # bin
        b"\xd4\x01\x00",  # fixext 1
        b"\xd6\xff\x00\x00\x00",  # timestamp ext with a bad length
        b"\x81\x01\x02",  # {1: 2}
        b"\x81\xc0\x02",  # {nil: 2}
        b"\x81\x90\x02",  # {[]: 2}
        b"\x91" * 100_000 + b"\x01",  # nested arrays, far beyond the unpacker's stack
        b"\x81\xa1a" * 50_000 + b"\xc0",  # nested maps
        b"\x01",
        b"\xc0",
        b"\x90",
        b"\xa4node",
        b"PK\x03\x04 not msgpack at all",
        "a str, not bytes",
    ],
)
def test_garbage_rejected(payload: bytes) -> None:
    with pytest.raises(SchemaError):
        decode_report(payload)


def test_moderately_nested_arrays_in_a_field() -> None:
    data = plain_report()
    nested: Any = 1
    for _ in range(500):
        nested = [nested]
    data["gpus"]["topology"] = nested
    assert rejection(data).startswith("gpus.topology[0][0]: expected an integer")


def test_validate_rejects_bad_objects_built_in_process() -> None:
    report = dataclasses.replace(make_report(), psi=Absent(""))
    with pytest.raises(SchemaError, match="psi.absent"):
        codec.validate(report)
    usage = dataclasses.replace(
        make_usage(), cpu=dataclasses.replace(make_usage().cpu, used_pct=math.nan)
    )
    with pytest.raises(SchemaError, match="usage.cpu.used_pct: nan"):
        codec.validate(dataclasses.replace(make_report(), usage=usage))


@pytest.mark.parametrize("value", [10**400, -(10**400), 10**5000], ids=["big", "-big", "huge"])
def test_huge_integers_in_plain_data(value: int) -> None:
    for path in [("measured_at",), ("seq",), ("usage", "cpu", "used_pct")]:
        data = plain_report()
        set_at(data, path, value)
        with pytest.raises(SchemaError, match=f"^{'.'.join(path)}: .* is outside"):
            codec.from_plain(NodeReport, data)


# -------------------------------------------------- mutation property


def leaf_paths(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every scalar and every empty container in plain data."""
    if isinstance(data, dict) and data:
        return [p for k, v in data.items() for p in leaf_paths(v, (*path, k))]
    if isinstance(data, list) and data:
        return [p for i, v in enumerate(data) for p in leaf_paths(v, (*path, i))]
    return [path]


PLAIN = plain_report()
LEAVES = leaf_paths(PLAIN)

msgpack_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=4)),
)
msgpack_values = st.recursive(
    msgpack_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def test_leaf_paths_cover_the_report() -> None:
    assert ("psi", "system", "irq", "absent") in LEAVES
    assert ("gpus", "topology", 1, 2) in LEAVES
    assert ("pods", "pods", 1, "labels") in LEAVES
    assert len(LEAVES) > 300


@settings(max_examples=200)
@given(st.sampled_from(LEAVES), msgpack_values)
@example(("seq",), 2**64 - 1)
@example(("psi", "system", "irq", "absent"), "")
@example(("pods", "pods", 1, "labels"), {"": ""})
def test_mutated_leaf_decodes_or_raises_schema_error(path: tuple[Any, ...], value: Any) -> None:
    data = copy.deepcopy(PLAIN)
    set_at(data, path, value)
    try:
        report = decode_report(msgpack.packb(data, use_bin_type=True))
    except SchemaError as e:
        assert str(e)
        return
    assert isinstance(report, NodeReport)


plain_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=8),
        st.binary(max_size=4),
        st.tuples(st.integers()),
    ),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.one_of(st.text(max_size=8), st.integers(), st.none()), inner, max_size=3
        )
    ),
    max_leaves=6,
)


@settings(max_examples=200)
@given(st.sampled_from(LEAVES), plain_values)
@example(("measured_at",), 10**400)
@example(("seq",), -(10**5000))
def test_mutated_leaf_of_plain_data_decodes_or_raises_schema_error(
    path: tuple[Any, ...], value: Any
) -> None:
    data = copy.deepcopy(PLAIN)
    set_at(data, path, value)
    try:
        report = codec.from_plain(NodeReport, data)
    except SchemaError as e:
        assert str(e)
        return
    assert isinstance(report, NodeReport)


@settings(max_examples=200)
@given(st.binary(max_size=64))
def test_random_bytes_decode_or_raise_schema_error(payload: bytes) -> None:
    with pytest.raises(SchemaError):
        decode_report(payload)


@settings(max_examples=100)
@given(st.data())
def test_random_byte_flips_decode_or_raise_schema_error(data: st.DataObject) -> None:
    payload = bytearray(encode(make_report()))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(payload) - 1))
        payload[index] = data.draw(st.integers(0, 255))
    try:
        report = decode_report(bytes(payload))
    except SchemaError:
        return
    assert isinstance(report, NodeReport)
