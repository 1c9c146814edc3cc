"""The strict msgpack codec: round trips, and SchemaError with a field path for every bad input."""

from __future__ import annotations

import copy
import datetime
import math
import types
import typing
from collections.abc import Callable
from typing import Any, Final

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from msgspec import structs

from common import codec
from common.codec import MAX_REPORT_BYTES, decode_directives, decode_report, encode
from common.errors import SchemaError
from common.schema import (
    MAX_ITEMS,
    Absent,
    CpuUsage,
    Directives,
    Enforcement,
    GpuDevice,
    GpuSection,
    LocalBounds,
    MemoryUsage,
    MigDevice,
    NodeReport,
    PodsSection,
    PodUsage,
    PsiGroup,
    PsiResource,
    PsiSection,
    UsageSection,
    is_absent,
)
from tests.kit import build_report

NOW = 1_767_225_600.25  # 2026-01-01T00:00:00.25Z
GIB = 2**30
MIB = 2**20

# ------------------------------------ the kit's report, with the schema's corners on top


def make_report() -> NodeReport:
    """The kit's realistic report, small (3 GPUs, 2 pods) so that each device and pod can
    be named, with the schema's corners on top: Absent inside a group and as an item of a
    map, a MIG GPU, a degraded GPU whose optional figures are unknown, a GPU pair with no
    known distance, a label beyond ASCII, an extended resource, a pod without labels, what
    the agent enforced, and one of the two pods measured (the other has no cgroup: no
    entry)."""
    base = build_report("gpu-node-17.example.internal", seq=42, now=NOW, gpus=3, pods=2)
    psi, gpus, pods = base.psi, base.gpus, base.pods
    assert isinstance(psi, PsiSection) and isinstance(psi.cgroups, dict)
    assert isinstance(gpus, GpuSection) and isinstance(pods, PodsSection)
    psi = structs.replace(
        psi,
        system=structs.replace(psi.system, irq=Absent("psi-irq-unsupported")),
        cgroups={**psi.cgroups, "besteffort": Absent("cgroup-missing")},
    )
    mig = structs.replace(
        gpus.devices[1],
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
    )
    degraded = structs.replace(
        gpus.devices[2],
        health="degraded",
        health_reasons=["remapped-rows-pending"],
        remapped_rows_pending=True,
        last_xid=94,
        ecc_enabled=None,
        ecc_uncorrected_volatile=None,
        nvlinks_active=None,
        numa_node=None,
    )
    topology = [list(row) for row in gpus.topology]
    topology[1][2] = topology[2][1] = None
    first = pods.pods[0]
    first = structs.replace(
        first,
        labels={**first.labels, "team": "ünïcødé ✓"},
        requests=structs.replace(first.requests, extended={"example.com/foo": 2}),
    )
    return structs.replace(
        base,
        psi=psi,
        gpus=structs.replace(gpus, devices=[gpus.devices[0], mig, degraded], topology=topology),
        pods=structs.replace(pods, pods=[first, structs.replace(pods.pods[1], labels={})]),
        enforcement=Enforcement(
            be_cpu_quota_m=2_000, source="coordinator", applied_at=NOW - 5.0, local_actions=3
        ),
        pod_usage={POD_1: PodUsage(cpu_m=3_250, cpu_some_avg10_pct=31.5, cpu_some_rate_pct=28.25)},
    )


POD_1: Final = build_report("x", pods=1).pods.pods[0].uid  # type: ignore[union-attr]
"""The UID of :func:`make_report`'s first pod, the one measured."""


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
        usage=UsageSection(measured_at=0.0, cpu=Absent("first-sample"), memory=_memory()),
        pods=Absent("apiserver-unreachable"),
    )


def _memory() -> MemoryUsage:
    usage = make_report().usage
    assert isinstance(usage, UsageSection) and isinstance(usage.memory, MemoryUsage)
    return usage.memory


def plain_report() -> dict[str, Any]:
    """The wire form of make_report(), as plain data read back from msgpack."""
    data: dict[str, Any] = msgspec.msgpack.decode(encode(make_report()))
    return data


def pack(data: Any) -> bytes:
    """msgpack bytes of plain data, however wrong for the schema."""
    return msgspec.msgpack.encode(data)


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
    assert data["psi"]["system"]["irq"] == "psi-irq-unsupported"
    assert data["psi"]["cgroups"]["besteffort"] == "cgroup-missing"
    assert data["psi"]["system"]["cpu"]["full"] is None
    assert data["gpus"]["topology"][1][2] is None
    assert data["pods"]["pods"][0]["labels"]["team"] == "ünïcødé ✓"
    assert data["pods"]["pods"][1]["limits"]["extended"] == {}
    sparse = msgspec.msgpack.decode(encode(make_sparse_report()))
    assert sparse["gpus"] == "nvml-unavailable"
    # Declaration order; ``enforcement`` and ``pod_usage`` at their defaults stay off the wire.
    defaults = {"enforcement", "pod_usage"}
    assert list(sparse) == [f for f in NodeReport.__struct_fields__ if f not in defaults]
    assert list(data)[-2:] == ["enforcement", "pod_usage"]
    assert data["enforcement"]["error"] is None
    # Per-pod use goes every report for every pod: an array, no field names, by pod UID.
    assert data["pod_usage"] == {POD_1: [3_250, 31.5, 28.25]}
    assert "usage" not in data["pods"]["pods"][0]


def test_pod_usage_may_be_absent_or_hold_unknown_figures() -> None:
    absent = structs.replace(make_report(), pod_usage=Absent("no-kubepods-cgroup"))
    assert decode_report(encode(absent)).pod_usage == "no-kubepods-cgroup"
    first = PodUsage(cpu_m=None, cpu_some_avg10_pct=None, cpu_some_rate_pct=None)
    unknown = structs.replace(make_report(), pod_usage={POD_1: first})
    assert msgspec.msgpack.decode(encode(unknown))["pod_usage"] == {POD_1: [None, None, None]}
    assert decode_report(encode(unknown)) == unknown


def test_pod_usage_is_bounded() -> None:
    data = plain_report()
    data["pod_usage"] = {f"uid-{i}": [1, None, None] for i in range(MAX_ITEMS + 1)}
    with pytest.raises(
        SchemaError, match=f"^pod_usage: expected `object` of length <= {MAX_ITEMS}"
    ):
        decode_report(pack(data))


def test_report_without_colocation_fields_decodes_with_defaults() -> None:
    # What agents built before colocation send: no enforcement, no per-pod usage.
    data = plain_report()
    del data["enforcement"]
    del data["pod_usage"]
    report = decode_report(pack(data))
    assert report.enforcement is None
    assert report.pod_usage is None
    assert encode(report) == pack(data)  # and it encodes back to the very same bytes


def test_decoded_report_is_typed() -> None:
    report = decode_report(encode(make_report()))
    assert isinstance(report.psi, PsiSection)
    assert is_absent(report.psi.system.irq)
    assert report.psi.system.irq == Absent("psi-irq-unsupported")
    assert isinstance(report.psi.cgroups, dict)
    assert report.psi.cgroups["besteffort"] == "cgroup-missing"  # an absent item in a map
    assert isinstance(report.psi.cgroups["burstable"], PsiGroup)
    assert isinstance(report.gpus, GpuSection)
    assert isinstance(report.gpus.devices[1].mig_devices[0], MigDevice)
    assert isinstance(report.pods, PodsSection)
    assert report.pods.pods[0].requests.extended == {"example.com/foo": 2}


def test_float_field_accepts_an_integer() -> None:
    data = plain_report()
    data["measured_at"] = 1_767_225_600
    data["usage"]["cpu"]["used_pct"] = 50
    report = decode_report(pack(data))
    assert report.measured_at == 1_767_225_600.0
    assert type(report.measured_at) is float
    assert isinstance(report.usage, UsageSection)
    assert isinstance(report.usage.cpu, CpuUsage)
    assert type(report.usage.cpu.used_pct) is float


def test_optional_field_with_default_may_be_omitted() -> None:
    data = plain_report()
    del data["pods"]["pods"][0]["limits"]["extended"]
    del data["psi"]["system"]["cpu"]["some"]["rate_pct"]
    report = decode_report(pack(data))
    assert isinstance(report.pods, PodsSection)
    assert report.pods.pods[0].limits.extended == {}
    assert isinstance(report.psi, PsiSection)
    assert isinstance(report.psi.system.cpu, PsiResource)
    assert report.psi.system.cpu.some is not None
    assert report.psi.system.cpu.some.rate_pct is None


def _ragged(data: dict[str, Any]) -> None:
    data["gpus"]["nvlinks"][1] = [18, 0]


def _short(data: dict[str, Any]) -> None:
    data["gpus"]["topology"] = [[0, 20], [20, 0]]


def _index_out_of_range(data: dict[str, Any]) -> None:
    data["gpus"]["devices"][2]["index"] = 3


def _index_twice(data: dict[str, Any]) -> None:
    data["gpus"]["devices"][2]["index"] = 0


def _extra_row(data: dict[str, Any]) -> None:
    data["gpus"]["nvlinks"].append([0, 0, 0])


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (_ragged, "gpus: nvlinks[1]: 2 entries for 3 devices"),
        (_short, "gpus: topology: 2 rows for 3 devices"),
        (_extra_row, "gpus: nvlinks: 4 rows for 3 devices"),
        (_index_out_of_range, "gpus: devices[2].index: 3 is not one of 0..2 once each"),
        (_index_twice, "gpus: devices[2].index: 0 is not one of 0..2 once each"),
    ],
)
def test_gpu_matrices_must_have_a_row_and_column_per_device(
    spoil: Callable[[dict[str, Any]], None], message: str
) -> None:
    data = plain_report()
    decode_report(pack(data))  # three devices, 3 × 3 matrices: fine as made
    spoil(data)
    with pytest.raises(SchemaError) as info:
        decode_report(pack(data))
    assert str(info.value) == message


def test_bounds_are_inclusive() -> None:
    data = plain_report()
    data["usage"]["memory"]["total_b"] = 2**50
    data["usage"]["cpu"]["used_pct"] = 100.0
    data["usage"]["cpu"]["steal_pct"] = 0
    data["pods"]["pods"][0]["priority"] = 2**31 - 1
    data["node"] = "n" * 253
    report = decode_report(pack(data))
    assert isinstance(report.usage, UsageSection)
    assert report.usage.memory.total_b == 2**50


# ------------------------------------------------ a strategy for valid reports


def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    """Values of a schema type, inside its Annotated bounds and lengths."""
    meta = msgspec.Meta()
    if typing.get_origin(tp) is typing.Annotated:
        tp, meta = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([strategy_for(option) for option in typing.get_args(tp)])
    if origin is list:
        (item,) = typing.get_args(tp)
        return st.lists(strategy_for(item), max_size=min(meta.max_length or 3, 3))
    if origin is dict:
        key, value = typing.get_args(tp)
        return st.dictionaries(
            strategy_for(key), strategy_for(value), max_size=min(meta.max_length or 3, 3)
        )
    if tp is Absent:
        return st.builds(Absent, st.text(st.characters(codec="utf-8"), min_size=1, max_size=20))
    if tp is GpuSection:
        return gpu_sections()
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return st.builds(tp, **{f.name: strategy_for(f.type) for f in structs.fields(tp)})
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(meta.ge, meta.le)
    if tp is float:
        return st.floats(meta.ge, meta.le, allow_nan=False, allow_infinity=False)
    if tp is str:
        return st.text(st.characters(codec="utf-8"), max_size=min(meta.max_length or 20, 20))
    if tp is type(None):
        return st.none()
    raise TypeError(f"no strategy for {tp!r}")


@st.composite
def gpu_sections(draw: st.DrawFn) -> GpuSection:
    """A GPU section as it must be: devices indexed 0 … n−1 (in any order) and both
    matrices n × n."""
    fields = {f.name: f.type for f in structs.fields(GpuSection)}
    devices = draw(st.lists(strategy_for(GpuDevice), max_size=3))
    order = draw(st.permutations(range(len(devices))))
    devices = [structs.replace(d, index=i) for d, i in zip(devices, order, strict=True)]
    n = len(devices)
    level = st.one_of(st.none(), st.integers(0, 100))
    return GpuSection(
        measured_at=draw(strategy_for(fields["measured_at"])),
        driver_version=draw(strategy_for(fields["driver_version"])),
        devices=devices,
        topology=draw(st.lists(st.lists(level, min_size=n, max_size=n), min_size=n, max_size=n)),
        nvlinks=draw(
            st.lists(st.lists(st.integers(0, 64), min_size=n, max_size=n), min_size=n, max_size=n)
        ),
    )


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
    assert msgspec.msgpack.decode(payload) == {
        "schema_version": 1,
        "node": "gpu-node-17",
        "issued_at": NOW,
        "ttl_s": 30.0,
        "be_cpu_quota_m": 2500,
    }
    assert decode_directives(payload) == DIRECTIVES
    unthrottled = structs.replace(DIRECTIVES, be_cpu_quota_m=None)
    assert decode_directives(encode(unthrottled)) == unthrottled
    without_quota = {"schema_version": 1, "node": "n", "issued_at": NOW, "ttl_s": 5}
    assert decode_directives(pack(without_quota)).be_cpu_quota_m is None


def test_colocation_directives_round_trip_and_wire_form() -> None:
    throttled = structs.replace(
        DIRECTIVES,
        be_cpu_quota_m=1500,
        be_reason="LS cpu some avg10 42.0% >= 30.0% for 10s",
        be_pods=["6d3c2f1e-0000-4000-8000-000000000001", "6d3c2f1e-0000-4000-8000-00000000000b"],
        local=LocalBounds(pressure_high_pct=30.0, window_s=1.0, quota_m=1000, hold_s=15.0),
    )
    payload = encode(throttled)
    assert decode_directives(payload) == throttled
    assert msgspec.msgpack.decode(payload)["local"] == {
        "pressure_high_pct": 30.0,
        "window_s": 1.0,
        "quota_m": 1000,
        "hold_s": 15.0,
    }
    # Unthrottled, the new fields hold their defaults and the answer is the old four keys.
    plain = msgspec.msgpack.decode(encode(structs.replace(DIRECTIVES, be_cpu_quota_m=None)))
    assert sorted(plain) == ["issued_at", "node", "schema_version", "ttl_s"]
    old = decode_directives(pack({"schema_version": 1, "node": "n", "issued_at": NOW, "ttl_s": 5}))
    assert (old.be_reason, old.be_pods, old.local) == ("", [], None)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"be_pods": ["u"] * 513}, "be_pods: expected `array` of length <= 512"),
        ({"be_pods": [1]}, "be_pods[0]: expected `str`, got `int`"),
        ({"be_reason": None}, "be_reason: expected `str`, got `None`"),
        ({"be_reason": "r" * 4097}, "be_reason: expected `str` of length <= 4096"),
        (
            {"local": {"pressure_high_pct": 101.0, "window_s": 1.0, "quota_m": 1, "hold_s": 1.0}},
            "local.pressure_high_pct: expected `float` <= 100.0",
        ),
        (
            {"local": {"pressure_high_pct": 30.0, "window_s": 1.0, "quota_m": -1, "hold_s": 1.0}},
            "local.quota_m: expected `int` >= 0",
        ),
        ({"local": {"window_s": 1.0}}, "local: object missing required field `pressure_high_pct`"),
    ],
)
def test_colocation_directives_rejected(change: dict[str, Any], fragment: str) -> None:
    data = {**codec.to_plain(DIRECTIVES), **change}
    with pytest.raises(SchemaError) as info:
        decode_directives(pack(data))
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (("enforcement", "source"), "s" * 254, "enforcement.source: expected `str` of length"),
        (("enforcement", "be_cpu_quota_m"), -5, "enforcement.be_cpu_quota_m: expected `int` >= 0"),
        (("enforcement", "local_actions"), 1.5, "enforcement.local_actions: expected `int`"),
        (("pod_usage", POD_1, 1), math.nan, "pod_usage[...][1]: expected `float` >= 0.0"),
        (("pod_usage", POD_1, 2), 100.5, "pod_usage[...][2]: expected `float` <= 100.0"),
        (("pod_usage", POD_1, 0), "3m", "pod_usage[...][0]: expected `int"),
        (("pod_usage", POD_1), [1, None], "pod_usage[...]: expected `array` of at least length 3"),
    ],
)
def test_colocation_report_fields_rejected(
    path: tuple[Any, ...], value: Any, fragment: str
) -> None:
    data = plain_report()
    set_at(data, path, value)
    assert fragment in rejection(data)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"schema_version": 2}, "schema_version: unknown schema version 2; this build reads 1"),
        ({"schema_version": None}, "schema_version: unknown schema version None"),
        ({"node": None}, "node: expected `str`, got `None`"),
        ({"node": "n" * 254}, "node: expected `str` of length <= 253"),
        ({"ttl_s": -1.0}, "ttl_s: expected `float` >= 0.0"),
        ({"ttl_s": math.nan}, "ttl_s: expected `float` >= 0.0"),
        ({"issued_at": "now"}, "issued_at: expected `float`, got `str`"),
        ({"be_cpu_quota_m": "2500m"}, "be_cpu_quota_m: expected `int | null`, got `str`"),
        ({"be_cpu_quota_m": 2500.0}, "be_cpu_quota_m: expected `int | null`, got `float`"),
        ({"be_cpu_quota_m": -1}, "be_cpu_quota_m: expected `int` >= 0"),
        ({"be_cpu_quota_m": "absent"}, "be_cpu_quota_m: expected `int | null`, got `str`"),
        ({"extra": 1}, "<root>: object contains unknown field `extra`"),
    ],
)
def test_directives_rejected(change: dict[str, Any], fragment: str) -> None:
    data = {**codec.to_plain(DIRECTIVES), **change}
    with pytest.raises(SchemaError) as info:
        decode_directives(pack(data))
    assert fragment in str(info.value)


def test_directives_missing_field_and_size_limit() -> None:
    data = codec.to_plain(DIRECTIVES)
    del data["ttl_s"]
    with pytest.raises(SchemaError, match="^<root>: object missing required field `ttl_s`$"):
        decode_directives(pack(data))
    with pytest.raises(SchemaError, match="exceeds the 65536-byte limit"):
        decode_directives(pack({**codec.to_plain(DIRECTIVES), "pad": "x" * 65536}))


def test_directives_are_not_a_report() -> None:
    with pytest.raises(SchemaError, match="missing|unknown field"):
        decode_report(encode(DIRECTIVES))
    with pytest.raises(SchemaError, match="unknown field"):
        decode_directives(encode(make_sparse_report()))


# ---------------------------------------------------------------- rejections


def get_at(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


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
        decode_report(pack(data))
    return str(info.value)


@pytest.mark.parametrize(
    ("version", "fragment"),
    [
        (2, "unknown schema version 2;"),
        (0, "unknown schema version 0;"),
        ("1", "unknown schema version '1';"),
        (True, "unknown schema version True;"),
        (1.5, "unknown schema version 1.5;"),
        (-1, "unknown schema version -1;"),
        ([1], "unknown schema version [1];"),
        ("v" * 10_000, "unknown schema version 'vvvvvvvvvvvv...vvvvvvvvvvvvv';"),
    ],
)
def test_unknown_schema_version(version: Any, fragment: str) -> None:
    data = plain_report()
    data["schema_version"] = version
    message = rejection(data)
    assert message.startswith("schema_version: ")
    assert fragment in message
    assert message.endswith("; this build reads 1")


def test_unknown_schema_version_is_reported_before_unknown_fields() -> None:
    data = plain_report()
    data["schema_version"] = 2
    data["field_from_the_future"] = {"x": 1}
    assert "unknown schema version 2" in rejection(data)


def test_missing_schema_version() -> None:
    data = plain_report()
    del data["schema_version"]
    assert rejection(data) == "<root>: object missing required field `schema_version`"


def test_float_schema_version_equal_to_one_is_still_refused() -> None:
    data = plain_report()
    data["schema_version"] = 1.0
    assert rejection(data) == "schema_version: expected `int`, got `float`"


BAD_VALUES = [
    # wrong types
    (("seq",), "42", "seq: expected `int`, got `str`"),
    (("seq",), 3.0, "seq: expected `int`, got `float`"),
    (("seq",), True, "seq: expected `int`, got `bool`"),
    (("seq",), None, "seq: expected `int`, got `None`"),
    (("node",), 17, "node: expected `str`, got `int`"),
    (("measured_at",), "2026-01-01", "measured_at: expected `float`, got `str`"),
    (("measured_at",), False, "measured_at: expected `float`, got `bool`"),
    (("pods", "pods", 0, "labels"), [["app", "train"]], "pods.pods[0].labels: expected `object`"),
    (("pods", "pods"), {"0": {}}, "pods.pods: expected `array`, got `object`"),
    (("psi", "system"), [], "psi.system: expected `object`, got `array`"),
    (("psi", "system"), None, "psi.system: expected `object`, got `None`"),
    (
        ("allocatable", "kubelet", "cgroups_per_qos"),
        1,
        "allocatable.kubelet.cgroups_per_qos: expected `bool`, got `int`",
    ),
    (
        ("gpus", "devices", 0, "mig_enabled"),
        "false",
        "gpus.devices[0].mig_enabled: expected `bool | null`, got `str`",
    ),
    (("gpus", "topology", 0, 1), 20.0, "gpus.topology[0][1]: expected `int | null`, got `float`"),
    (
        ("pods", "pods", 0, "labels", "app"),
        7,
        "pods.pods[0].labels[...]: expected `str`, got `int`",
    ),
    (
        ("memfrag", "compaction", "counters", "compact_stall"),
        -1,
        "memfrag.compaction.counters[...]: expected `int` >= 0",
    ),
    (("node",), b"gpu-node", "node: expected `str`, got `bytes`"),
    (("node",), b"", "node: expected `str`, got `bytes`"),
    # not finite: every float field is bounded, and NaN or an infinity fails a bound
    (("measured_at",), math.nan, "measured_at: expected `float` >= 0.0"),
    (("usage", "cpu", "used_pct"), math.inf, "usage.cpu.used_pct: expected `float` <= 100.0"),
    (
        ("gpus", "devices", 0, "util_gpu_pct"),
        -math.inf,
        "gpus.devices[0].util_gpu_pct: expected `float` >= 0.0",
    ),
    (
        ("psi", "system", "cpu", "some", "avg10_pct"),
        math.nan,
        "psi.system.cpu.some.avg10_pct: expected `float` >= 0.0",
    ),
    (
        ("memfrag", "zones", 1, "unusable_frac_by_order", 3),
        math.nan,
        "memfrag.zones[1].unusable_frac_by_order[3]: expected `float` >= 0.0",
    ),
    (
        ("memfrag", "compaction", "rates_per_s", "compact_stall"),
        math.inf,
        "memfrag.compaction.rates_per_s[...]: expected `float` <= 1000000000000000.0",
    ),
    # out of range
    (("usage", "memory", "total_b"), -1, "usage.memory.total_b: expected `int` >= 0"),
    (
        ("usage", "memory", "total_b"),
        2**50 + 1,
        "usage.memory.total_b: expected `int` <= 1125899906842624",
    ),
    (
        ("memfrag", "zones", 0, "free_b_by_order", 2),
        2**63,
        "memfrag.zones[0].free_b_by_order[2]: expected `int` <= 1125899906842624",
    ),
    (("usage", "cpu", "used_pct"), 100.5, "usage.cpu.used_pct: expected `float` <= 100.0"),
    (("usage", "cpu", "iowait_pct"), -0.5, "usage.cpu.iowait_pct: expected `float` >= 0.0"),
    (
        ("memfrag", "nodes", 0, "unusable_2mib_frac"),
        1.01,
        "memfrag.nodes[0].unusable_2mib_frac: expected `float` <= 1.0",
    ),
    (("measured_at",), 2.0**35, "measured_at: expected `float` <= 17179869184.0"),
    (("measured_at",), -1.0, "measured_at: expected `float` >= 0.0"),
    (("seq",), -1, "seq: expected `int` >= 0"),
    (("seq",), 2**64 - 1, "seq: expected `int` <= 9223372036854775807"),
    (("pods", "pods", 0, "priority"), 2**31, "pods.pods[0].priority: expected `int` <= 2147483647"),
    (("pods", "pods", 0, "priority"), -(2**31) - 1, "pods.pods[0].priority: expected `int` >= "),
    (("allocatable", "cgroup", "version"), 3, "allocatable.cgroup.version: expected `int` <= 2"),
    (
        ("allocatable", "cgroup", "kubepods", "cpu_weight"),
        0,
        "allocatable.cgroup.kubepods.cpu_weight: expected `int` >= 1",
    ),
    (
        ("allocatable", "cpu", "capacity_m"),
        100_000_001,
        "allocatable.cpu.capacity_m: expected `int` <= 100000000",
    ),
    (("gpus", "nvlinks", 0, 1), 65, "gpus.nvlinks[0][1]: expected `int` <= 64"),
    (
        ("numa", "nodes", 0, "distances", 1),
        256,
        "numa.nodes[0].distances[1]: expected `int` <= 255",
    ),
    # strings, lists and maps over their max_length
    (("node",), "n" * 254, "node: expected `str` of length <= 253"),
    (
        ("pods", "pods", 0, "labels", "team"),
        "x" * 4097,
        "pods.pods[0].labels[...]: expected `str` of length <= 4096",
    ),
    (
        ("pods", "pods", 0, "labels"),
        {"k" * 254: "v"},
        "pods.pods[0].labels.<key>: expected `str` of length <= 253",
    ),
    (
        ("memfrag", "compaction", "counters"),
        {"k" * 4097: 1},
        "memfrag.compaction.counters.<key>: expected `str` of length <= 4096",
    ),
    (("psi", "system", "path"), "p" * 4097, "psi.system.path: expected `str` of length <= 4096"),
    (
        ("gpus", "devices", 0, "health_reasons"),
        ["xid-79"] * 33,
        "gpus.devices[0].health_reasons: expected `array` of length <= 32",
    ),
    (
        ("allocatable", "kubelet", "enforce_node_allocatable"),
        ["pods"] * 9,
        "allocatable.kubelet.enforce_node_allocatable: expected `array` of length <= 8",
    ),
    (
        ("numa", "nodes", 0, "distances"),
        [10] * 1025,
        "numa.nodes[0].distances: expected `array` of length <= 1024",
    ),
    (("gpus", "topology", 0), [0] * 65, "gpus.topology[0]: expected `array` of length <= 64"),
    (
        ("pods", "pods", 0, "labels"),
        {f"k{i}": "v" for i in range(65)},
        "pods.pods[0].labels: expected `object` of length <= 64",
    ),
    (
        ("psi", "cgroups"),
        {f"g{i}": "absent" for i in range(17)},
        "psi.cgroups: expected `object` of length <= 16",
    ),
    # Absent is a reason string, non-empty and at most 4096 chars; the map it once was is refused
    (("psi",), "", "psi: expected `str` of length >= 1"),
    (("psi", "system", "irq"), "", "psi.system.irq: expected `str` of length >= 1"),
    (("psi", "cgroups", "besteffort"), "", "psi.cgroups[...]: expected `str` of length >= 1"),
    (
        ("allocatable", "cgroup", "qos", "besteffort"),
        "",
        "allocatable.cgroup.qos[...]: expected `str` of length >= 1",
    ),
    (("psi",), "x" * 4097, "psi: expected `str` of length <= 4096"),
    (("psi",), {"absent": "psi-unsupported"}, "psi: object contains unknown field `absent`"),
    (
        ("psi", "system", "irq"),
        {"absent": "psi-irq-unsupported"},
        "psi.system.irq: object contains unknown field `absent`",
    ),
    (("gpus",), 5, "gpus: expected `str | object`, got `int`"),
    (("gpus",), None, "gpus: expected `str | object`, got `None`"),
    (("gpus",), {}, "gpus: object missing required field `measured_at`"),
    (("memfrag", "hugepages"), {}, "memfrag.hugepages: expected `str | array`, got `object`"),
    # ... and it stands only where the schema lets a section or item be absent
    (("numa", "nodes", 0), "offline", "numa.nodes[0]: expected `object`, got `str`"),
    (("usage", "memory"), "not-measured", "usage.memory: expected `object`, got `str`"),
    (("psi", "system"), "not-measured", "psi.system: expected `object`, got `str`"),
    (("node",), {"absent": "x"}, "node: expected `str`, got `object`"),
    # extension types
    (("seq",), msgspec.msgpack.Ext(5, b"\x00"), "seq: expected `int`, got `ext`"),
    (
        ("pods", "pods", 0, "labels", "app"),
        msgspec.msgpack.Ext(127, b""),
        "pods.pods[0].labels[...]: expected `str`, got `ext`",
    ),
    (
        ("measured_at",),
        datetime.datetime.fromtimestamp(1_767_225_600, datetime.UTC),  # the timestamp ext, -1
        "measured_at: expected `float`, got `ext`",
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
        (("node",), "<root>: object missing required field `node`"),
        (("psi",), "<root>: object missing required field `psi`"),
        (("numa", "nodes", 0, "cpus"), "numa.nodes[0]: object missing required field `cpus`"),
        (("psi", "system", "cpu", "full"), "psi.system.cpu: object missing required field `full`"),
        (
            ("gpus", "devices", 1, "mig_devices", 0, "uuid"),
            "gpus.devices[1].mig_devices[0]: object missing required field `uuid`",
        ),
        (
            ("pods", "pods", 0, "requests", "cpu_m"),
            "pods.pods[0].requests: object missing required field `cpu_m`",
        ),
        (
            ("psi", "cgroups", "burstable", "path"),
            "psi.cgroups[...]: object missing required field `path`",
        ),
    ],
)
def test_missing_required_field(path: tuple[Any, ...], message: str) -> None:
    data = plain_report()
    del_at(data, path)
    assert rejection(data) == message


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ((), "<root>: object contains unknown field `hostname`"),
        (("psi", "system"), "psi.system: object contains unknown field `hostname`"),
        (("gpus", "devices", 2), "gpus.devices[2]: object contains unknown field `hostname`"),
        (
            ("pods", "pods", 1, "limits"),
            "pods.pods[1].limits: object contains unknown field `hostname`",
        ),
    ],
)
def test_unknown_field(path: tuple[Any, ...], message: str) -> None:
    data = plain_report()
    target: Any = data
    for step in path:
        target = target[step]
    target["hostname"] = "x"
    assert rejection(data) == message


@pytest.mark.parametrize(
    ("path", "where"),
    [
        ((), "<root>.<key>"),
        (("psi",), "psi.<key>"),
        (("pods", "pods", 0, "labels"), "pods.pods[0].labels.<key>"),
        (("memfrag", "compaction", "counters"), "memfrag.compaction.counters.<key>"),
    ],
)
@pytest.mark.parametrize(
    ("key", "kinds"), [(7, {"int"}), (b"", {"bytes"}), (None, {"None", "null"})]
)
def test_non_string_map_keys(path: tuple[Any, ...], where: str, key: Any, kinds: set[str]) -> None:
    data = plain_report()
    target: Any = data
    for step in path:
        target = target[step]
    target[key] = 1
    assert rejection(data) in {f"{where}: expected `str`, got `{kind}`" for kind in kinds}


def test_non_string_map_keys_in_plain_data() -> None:
    data = plain_report()
    data["pods"]["pods"][0]["labels"][7] = "x"
    with pytest.raises(SchemaError, match=r"^pods\.pods\[0\]\.labels\.<key>: expected `str`"):
        codec.from_plain(NodeReport, data)
    data = plain_report()
    data[("tuple", "key")] = 1
    with pytest.raises(SchemaError, match=r"^<root>\.<key>: expected `str`"):
        codec.from_plain(NodeReport, data)


def test_oversized_payload() -> None:
    data = plain_report()
    data["node"] = "n" * MAX_REPORT_BYTES
    payload = pack(data)
    with pytest.raises(SchemaError, match=f"exceeds the {MAX_REPORT_BYTES}-byte limit"):
        decode_report(payload)
    with pytest.raises(SchemaError, match="exceeds the 1048576-byte limit"):
        decode_report(b"\x00" * (MAX_REPORT_BYTES + 1))
    with pytest.raises(SchemaError, match="exceeds the 100-byte limit"):
        decode_report(encode(make_report()), max_bytes=100)


def test_every_truncation_is_rejected() -> None:
    payload = encode(make_report())
    assert len(payload) > 1000
    for end in range(len(payload)):
        with pytest.raises(SchemaError):
            decode_report(payload[:end])


def test_trailing_bytes_are_rejected() -> None:
    with pytest.raises(SchemaError, match="^malformed msgpack: trailing characters"):
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
    assert rejection(data) == "gpus.topology[0][0]: expected `int | null`, got `array`"


def test_validate_rejects_bad_objects_built_in_process() -> None:
    report = structs.replace(make_report(), psi=Absent(""))
    with pytest.raises(SchemaError, match="^psi: expected `str` of length >= 1$"):
        codec.validate(report)
    full = make_report().usage
    assert isinstance(full, UsageSection) and isinstance(full.cpu, CpuUsage)
    usage = structs.replace(full, cpu=structs.replace(full.cpu, used_pct=math.nan))
    with pytest.raises(SchemaError, match="^usage.cpu.used_pct: expected `float` >= 0.0$"):
        codec.validate(structs.replace(make_report(), usage=usage))


@pytest.mark.parametrize("value", [10**400, -(10**400), 10**5000], ids=["big", "-big", "huge"])
def test_huge_integers_in_plain_data(value: int) -> None:
    for path in [("measured_at",), ("seq",), ("usage", "cpu", "used_pct")]:
        data = plain_report()
        set_at(data, path, value)
        with pytest.raises(SchemaError, match=f"^{'.'.join(path)}: (number out of range|expected)"):
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
    st.builds(msgspec.msgpack.Ext, st.integers(-128, 127), st.binary(max_size=4)),
)
msgpack_values = st.recursive(
    msgpack_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def float_types(info: msgspec.inspect.Type) -> list[msgspec.inspect.FloatType]:
    """Every float type within a type, however deeply nested."""
    if isinstance(info, msgspec.inspect.FloatType):
        return [info]
    if isinstance(info, msgspec.inspect.StructType):
        return [t for f in info.fields for t in float_types(f.type)]
    if isinstance(info, msgspec.inspect.UnionType):
        return [t for option in info.types for t in float_types(option)]
    if isinstance(info, msgspec.inspect.ListType):
        return float_types(info.item_type)
    if isinstance(info, msgspec.inspect.DictType):
        return float_types(info.key_type) + float_types(info.value_type)
    return []


@pytest.mark.parametrize("tp", [NodeReport, Directives])
def test_every_float_field_is_bounded(tp: type) -> None:
    # NaN and infinities are refused only because they fail a bound.
    floats = float_types(msgspec.inspect.type_info(tp))
    assert floats
    assert all(t.ge is not None and t.le is not None for t in floats)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_every_float_in_a_report_refuses_what_is_not_finite(value: float) -> None:
    floats = [p for p in LEAVES if type(get_at(PLAIN, p)) is float]
    assert len(floats) > 50
    for path in floats:
        data = copy.deepcopy(PLAIN)
        set_at(data, path, value)
        message = rejection(data)
        assert message.startswith(path[0]) and ": expected `float` " in message


def test_leaf_paths_cover_the_report() -> None:
    assert ("psi", "system", "irq") in LEAVES
    assert ("gpus", "topology", 1, 2) in LEAVES
    assert ("pods", "pods", 1, "labels") in LEAVES
    assert len(LEAVES) > 300


@settings(max_examples=200)
@given(st.sampled_from(LEAVES), msgpack_values)
@example(("seq",), 2**64 - 1)
@example(("psi", "system", "irq"), "")
@example(("pods", "pods", 1, "labels"), {"": ""})
def test_mutated_leaf_decodes_or_raises_schema_error(path: tuple[Any, ...], value: Any) -> None:
    data = copy.deepcopy(PLAIN)
    set_at(data, path, value)
    try:
        report = decode_report(pack(data))
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


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in plain data a value sits, containers included."""
    items = data.items() if isinstance(data, dict) else enumerate(data)
    found = []
    for key, value in items:
        found.append((*prefix, key))
        if isinstance(value, dict | list):
            found.extend(paths(value, (*prefix, key)))
    return found


AWKWARD = [
    None, True, False, 0, -1, 1, 7, 2**31, 2**50, 2**50 + 1, 2**63 - 1, -(2**63), 2**64 - 1,
    0.0, -0.0, 0.5, 1.0, 1.5, 100.0, 100.5, 2.0**34, math.nan, math.inf, -math.inf,
    "", "x", "ok", "x" * 254, "x" * 5000, [], [1], [None], [0.5], ["a"], {}, {"a": 1},
    {"absent": "why"}, {1: 2},
]  # fmt: skip
BASES = [PLAIN, msgspec.msgpack.decode(encode(make_sparse_report()))]


def outcome(decode: Any) -> Any:
    """What a decode gives: the value, or the message of its SchemaError."""
    try:
        return decode()
    except SchemaError as e:
        return f"refused: {e}"


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_wire_and_plain_decoding_agree_on_damaged_reports(data: st.DataObject) -> None:
    """:func:`codec.decode` and :func:`codec.from_plain` apply the same rules."""
    base = copy.deepcopy(data.draw(st.sampled_from(BASES)))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths(base)))
        action = data.draw(st.sampled_from(["replace", "delete", "add"]))
        parent = get_at(base, path[:-1])
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[data.draw(st.sampled_from(["extra", "absent", "node", 5]))] = 1
        elif action == "add":
            parent.append(copy.deepcopy(data.draw(st.sampled_from(AWKWARD))))
        else:
            set_at(base, path, copy.deepcopy(data.draw(st.sampled_from(AWKWARD))))

    wire = outcome(lambda: decode_report(pack(base)))
    plain = outcome(lambda: codec.from_plain(NodeReport, base))

    assert isinstance(wire, str) == isinstance(plain, str)
    if not isinstance(wire, str):
        assert wire == plain


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
