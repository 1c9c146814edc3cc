"""GPU collector against a faithful fake NVML (see fake_nvml.py), plus real-NVML checks.

Expected values come from the scenario definitions in fake_nvml.py or are written out
here; every section also goes through ``codec.validate``.
"""

from __future__ import annotations

import ctypes
import inspect
import subprocess
import sys
from pathlib import Path

import msgspec
import pynvml
import pytest

from agent.collectors import gpus
from agent.collectors.base import NoData
from agent.hostpaths import HostPaths
from agent.kernelfiles import CollectorError
from agent.settings import AgentSettings
from common import codec, schema
from common.schema import GpuSection, MigDevice
from tests.agent.collectors import fake_nvml as fake
from tests.hosts import FakeClock

NOW = 1_700_000_000.0
XID = pynvml.nvmlEventTypeXidCriticalError


def make(host: fake.FakeNvml, sys_root: Path) -> gpus.GpuCollector:
    return gpus.GpuCollector(clock=FakeClock(wall_s=NOW), sys_root=sys_root, nvml=host)


def collect(collector: gpus.GpuCollector) -> GpuSection:
    section = collector.collect()
    assert isinstance(section, GpuSection)
    return codec.validate(section)


@pytest.fixture
def h100_sys(tmp_path: Path) -> Path:
    return fake.write_sys_numa(tmp_path, dict(zip(fake.H100_BUS_IDS, fake.H100_NUMA, strict=True)))


@pytest.fixture
def pcie_sys(tmp_path: Path) -> Path:
    return fake.write_sys_numa(tmp_path, dict(zip(fake.PCIE_BUS_IDS, fake.PCIE_NUMA, strict=True)))


# ------------------------------------------------------------------ the fake itself


def test_fake_has_pynvml_signatures() -> None:
    """The fake is only useful if the collector's calls would also work on real pynvml."""
    names = [n for n in vars(fake.FakeNvml) if n.startswith("nvml")]
    assert len(names) >= 25
    for name in names:
        real = list(inspect.signature(getattr(pynvml, name)).parameters)
        double = list(inspect.signature(getattr(fake.FakeNvml, name)).parameters)[1:]
        assert double == real, name


def test_fake_raises_real_pynvml_errors() -> None:
    host = fake.pcie_host()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        host.nvmlDeviceGetCount()
    host.nvmlInit()
    handle = host.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        host.nvmlDeviceGetNvLinkState(handle, 0)


def test_importing_the_module_does_not_import_pynvml() -> None:
    code = "import sys, agent.collectors.gpus; sys.exit('pynvml' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# ----------------------------------------------------------------------- scenarios


def test_h100_host_inventory(h100_sys: Path) -> None:
    section = collect(make(fake.h100_host(), h100_sys))

    assert section.measured_at == NOW
    assert section.driver_version == "550.54.15"
    assert [d.index for d in section.devices] == list(range(8))
    assert [d.uuid for d in section.devices] == [fake.uuid("h100", i) for i in range(8)]
    assert [d.pci_bus_id for d in section.devices] == fake.H100_BUS_IDS
    assert [d.numa_node for d in section.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    for i, d in enumerate(section.devices):
        assert d.name == "NVIDIA H100 80GB HBM3"
        assert d.mem_total_b == 80 * 2**30
        assert d.mem_used_b == (i + 1) * 2**30
        assert (d.util_gpu_pct, d.util_mem_pct) == (10.0 * i, 5.0 * i)
        assert (d.mig_enabled, d.mig_devices) == (False, [])
        assert (d.ecc_enabled, d.ecc_uncorrected_volatile) == (True, 0)
        assert d.retired_pages_pending is None
        assert (d.remapped_rows_pending, d.remapping_failed) == (False, False)
        assert d.nvlinks_active == 18
        assert (d.xid_critical, d.last_xid) == (0, None)
        assert (d.health, d.health_reasons) == ("ok", [])


def test_h100_host_matrices(h100_sys: Path) -> None:
    section = collect(make(fake.h100_host(), h100_sys))

    same_socket = [0, 40, 40, 40, 50, 50, 50, 50]
    assert section.topology[0] == same_socket
    assert section.topology[5] == [50, 50, 50, 50, 40, 0, 40, 40]
    assert all(section.topology[i][i] == 0 for i in range(8))
    assert section.nvlinks == [[0 if i == j else 18 for j in range(8)] for i in range(8)]


def test_nvswitch_pair_is_limited_by_the_gpu_with_fewer_active_links(h100_sys: Path) -> None:
    host = fake.h100_host()
    for link in host.gpus[5].nvlinks[-2:]:
        link.active = False
    section = collect(make(host, h100_sys))

    assert section.devices[5].nvlinks_active == 16
    assert section.nvlinks[5] == [16, 16, 16, 16, 16, 0, 16, 16]
    assert [row[5] for row in section.nvlinks] == [16, 16, 16, 16, 16, 0, 16, 16]
    assert section.nvlinks[0] == [0, 18, 18, 18, 18, 16, 18, 18]


def test_pcie_host(pcie_sys: Path) -> None:
    section = collect(make(fake.pcie_host(), pcie_sys))

    assert [d.uuid for d in section.devices] == [fake.uuid("l40s", i) for i in range(4)]
    assert [d.numa_node for d in section.devices] == [0, 0, 0, 1]
    assert [d.util_gpu_pct for d in section.devices] == [0.0, 25.0, 50.0, 75.0]
    assert [d.nvlinks_active for d in section.devices] == [None] * 4
    assert [d.mig_enabled for d in section.devices] == [None] * 4
    assert section.topology == [[0, 10, 20, 50], [10, 0, 20, 50], [20, 20, 0, 50], [50, 50, 50, 0]]
    assert section.nvlinks == [[0] * 4 for _ in range(4)]
    assert {d.health for d in section.devices} == {"ok"}


def test_sysfs_numa_unknown_or_missing_is_none(tmp_path: Path) -> None:
    sys_root = fake.write_sys_numa(tmp_path, {fake.PCIE_BUS_IDS[0]: -1, fake.PCIE_BUS_IDS[1]: 1})
    section = collect(make(fake.pcie_host(), sys_root))

    assert [d.numa_node for d in section.devices] == [None, 1, None, None]


def test_numa_is_the_cpu_side_node_never_the_gpu_memory_node(tmp_path: Path) -> None:
    """On Grace Hopper nvmlDeviceGetNumaNodeId names the GPU-memory node (1); kubelet aligns
    to the CPU-side node (0), which sysfs gives and NVML's memory affinity repeats."""
    sys_root = fake.write_sys_numa(tmp_path / "a", {fake.GH200_BUS_ID: fake.GH200_SYSFS_NUMA})
    section = collect(make(fake.gh200_host(), sys_root))
    assert section.devices[0].numa_node == 0
    assert section.devices[0].pci_bus_id == "00000009:01:00.0"

    section = collect(make(fake.gh200_host(), tmp_path / "no-sysfs"))
    assert section.devices[0].numa_node == 0


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        (0b1, 0),  # a one-socket VM: sysfs says -1, nvidia-smi says "NUMA Affinity 0"
        (0b10, 1),
        (1 << 70, 70),  # past the first 64-bit word of the mask
        (0b11, None),  # equidistant from two nodes: nothing single to align to
        (None, None),  # NotSupported
    ],
)
def test_numa_from_nvml_memory_affinity_where_sysfs_has_none(
    tmp_path: Path, affinity: int | None, expected: int | None
) -> None:
    nvml = fake.pcie_host()
    nvml.gpus[0].memory_affinity = affinity
    sys_root = fake.write_sys_numa(tmp_path, {fake.PCIE_BUS_IDS[0]: -1})
    section = collect(make(nvml, sys_root))

    assert section.devices[0].numa_node == expected
    assert section.devices[0].health_reasons == []


def test_mig_host(tmp_path: Path) -> None:
    section = collect(make(fake.mig_host(), tmp_path))
    mig, plain = section.devices

    assert mig.mig_enabled is True
    assert mig.mig_devices == [
        MigDevice(
            uuid="MIG-a1000000-0000-4000-8000-000000000001",
            gpu_instance_id=1,
            compute_instance_id=0,
            mem_total_b=19968 * 2**20,
            profile="3g.20gb",
            placement_start=4,
        ),
        MigDevice(
            uuid="MIG-a1000000-0000-4000-8000-000000000002",
            gpu_instance_id=5,
            compute_instance_id=0,
            mem_total_b=9856 * 2**20,
            profile="1c.2g.10gb",  # one compute slice of a two-slice GPU instance
            placement_start=0,
        ),
        MigDevice(
            uuid="MIG-a1000000-0000-4000-8000-000000000003",
            gpu_instance_id=13,
            compute_instance_id=0,
            mem_total_b=4864 * 2**20,
            profile="1g.5gb+me",
            placement_start=2,
        ),
    ]
    assert (mig.util_gpu_pct, mig.util_mem_pct) == (None, None)
    assert (mig.remapped_rows_pending, mig.remapping_failed) == (None, None)
    assert (mig.mem_total_b, mig.mem_used_b) == (40 * 2**30, 2 * 2**30)
    assert (mig.health, mig.health_reasons) == ("ok", [])

    assert (plain.mig_enabled, plain.mig_devices) == (False, [])
    assert (plain.util_gpu_pct, plain.util_mem_pct) == (63.0, 21.0)
    assert (plain.remapped_rows_pending, plain.remapping_failed) == (False, False)
    assert section.topology == [[0, 50], [50, 0]]


def test_mig_profile_unknown_to_nvml_leaves_it_unnamed(tmp_path: Path) -> None:
    """GPU instances of a profile go-nvlib has no name for (a graphics profile): reported,
    their start known, their profile not; nothing is unhealthy."""
    host = fake.mig_host()
    gfx = pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX
    host.gpus[0].gi_profiles[gfx] = (30, 1, 4864)
    for m in host.gpus[0].migs:
        m.gi_profile = gfx
    (mig, _) = collect(make(host, tmp_path)).devices
    assert [(d.profile, d.placement_start) for d in mig.mig_devices] == [
        (None, 4),
        (None, 0),
        (None, 2),
    ]
    assert (mig.health, mig.health_reasons) == ("ok", [])


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        ("nvmlGpuInstanceGetInfo", "mig-gi-info: Unknown"),
        ("nvmlDeviceGetGpuInstanceProfileInfo", "mig-gi-profile: Unknown"),
        ("nvmlComputeInstanceGetInfo", "mig-ci-info: Unknown"),
        ("nvmlGpuInstanceGetComputeInstanceProfileInfo", "mig-ci-profile: Unknown"),
    ],
)
def test_a_failing_mig_profile_read_is_a_reason(tmp_path: Path, fn: str, reason: str) -> None:
    host = fake.mig_host()
    host.gpus[0].errors[fn] = pynvml.NVML_ERROR_UNKNOWN
    (mig, _) = collect(make(host, tmp_path)).devices
    assert [d.profile for d in mig.mig_devices] == [None] * 3
    assert mig.health == "ok" and reason in mig.health_reasons


def test_profile_index_tables_are_nvml_h() -> None:
    """The indices are pynvml's own constants (nvml.h), slice counts as their names say."""
    gi = {
        getattr(pynvml, f"NVML_GPU_INSTANCE_PROFILE_{n}"): slices
        for n, slices in [
            ("1_SLICE", 1),
            ("2_SLICE", 2),
            ("3_SLICE", 3),
            ("4_SLICE", 4),
            ("7_SLICE", 7),
            ("8_SLICE", 8),
            ("6_SLICE", 6),
            ("1_SLICE_REV1", 1),
            ("2_SLICE_REV1", 2),
            ("1_SLICE_REV2", 1),
        ]
    }
    assert gi == gpus.GI_PROFILE_SLICES
    assert {
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1,
        pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1,
    } == gpus.GI_PROFILE_MEDIA
    ci = {
        getattr(pynvml, f"NVML_COMPUTE_INSTANCE_PROFILE_{n}"): slices
        for n, slices in [
            ("1_SLICE", 1),
            ("2_SLICE", 2),
            ("3_SLICE", 3),
            ("4_SLICE", 4),
            ("7_SLICE", 7),
            ("8_SLICE", 8),
            ("6_SLICE", 6),
            ("1_SLICE_REV1", 1),
        ]
    }
    assert ci == gpus.CI_PROFILE_SLICES


@pytest.mark.parametrize(
    ("total_b", "memory_mb", "gb"),
    [
        (40 * 2**30, 4864, 5),  # A100-40GB 1g: 0.119 of the board -> an eighth of 40
        (40 * 2**30, 19968, 20),
        (40 * 2**30, 40192, 40),
        (80 * 2**30, 9728, 10),
        (80 * 2**30, 5000, 10),  # 0.49 of an eighth: rounded up, not to the nearest
        (81559 * 2**20, 40448, 40),  # H100 80GB HBM3 reports 81559 MiB
        (20 * 2**30, 2560, 3),  # 2.5 GB rounds half away from zero, as Go does
    ],
)
def test_mig_memory_gb_as_go_nvlib_rounds(total_b: int, memory_mb: int, gb: int) -> None:
    assert gpus._mig_memory_gb(total_b, memory_mb) == gb


def test_a_mig_device_without_the_late_fields_is_the_old_wire_form() -> None:
    old = MigDevice(uuid="MIG-x", gpu_instance_id=1, compute_instance_id=0, mem_total_b=None)
    assert set(msgspec.msgpack.decode(msgspec.msgpack.encode(old))) == {
        "uuid",
        "gpu_instance_id",
        "compute_instance_id",
        "mem_total_b",
    }


def test_host_where_half_of_nvml_is_not_supported(tmp_path: Path) -> None:
    section = collect(make(fake.sparse_host(), tmp_path))

    assert section.driver_version is None
    assert section.topology == [[0, 30, 40], [30, 0, 40], [40, 40, 0]]
    assert section.nvlinks == [[0] * 3 for _ in range(3)]
    for i, d in enumerate(section.devices):
        assert d.uuid == fake.uuid("a400", i)
        assert (d.mem_total_b, d.mem_used_b) == (16 * 2**30, 2**29)
        assert (d.util_gpu_pct, d.util_mem_pct) == (7.0, 3.0)
        assert d.numa_node is None
        assert (d.mig_enabled, d.mig_devices) == (None, [])
        assert (d.ecc_enabled, d.ecc_uncorrected_volatile) == (None, None)
        assert d.retired_pages_pending is None
        assert (d.remapped_rows_pending, d.remapping_failed) == (None, None)
        assert d.nvlinks_active is None
        assert (d.health, d.health_reasons) == ("ok", [])


def test_nvlink_bridge_links_go_straight_to_the_peer(tmp_path: Path) -> None:
    section = collect(make(fake.bridged_pair_host(), tmp_path))

    assert [d.nvlinks_active for d in section.devices] == [12, 12]
    assert section.nvlinks == [[0, 12], [12, 0]]


def test_topology_not_supported(pcie_sys: Path) -> None:
    host = fake.pcie_host()
    host.topology = None
    section = collect(make(host, pcie_sys))

    assert section.topology == [[0 if i == j else None for j in range(4)] for i in range(4)]
    assert {d.health for d in section.devices} == {"ok"}


def test_older_bindings_returning_bytes(pcie_sys: Path) -> None:
    host = fake.pcie_host()
    host.strings_as_bytes = True
    section = collect(make(host, pcie_sys))

    assert section.driver_version == "550.54.15"
    assert [d.uuid for d in section.devices] == [fake.uuid("l40s", i) for i in range(4)]
    assert [d.pci_bus_id for d in section.devices] == fake.PCIE_BUS_IDS
    assert {d.name for d in section.devices} == {"NVIDIA L40S"}
    assert [d.numa_node for d in section.devices] == [0, 0, 0, 1]


# ------------------------------------------------------------- availability, lifecycle


@pytest.mark.parametrize(
    ("code", "detail"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"),
    ],
)
def test_nvml_unavailable_is_no_data_and_init_is_retried(
    tmp_path: Path, code: int, detail: str
) -> None:
    host = fake.pcie_host()
    host.init_error = code
    collector = make(host, tmp_path)
    with pytest.raises(NoData) as exc:
        collector.collect()
    assert exc.value.reason == f"nvml-unavailable: {detail}"

    # Loading is not retried every cycle, only after INIT_RETRY_S.
    host.init_error = None
    with pytest.raises(NoData):
        collector.collect()
    assert host.init_calls == 1
    collector._clock.advance(gpus.INIT_RETRY_S)
    assert len(collect(collector).devices) == 4
    assert host.init_calls == 2


def test_nvml_init_failing_otherwise_is_an_error(tmp_path: Path) -> None:
    host = fake.pcie_host()
    host.init_error = pynvml.NVML_ERROR_NO_PERMISSION
    with pytest.raises(CollectorError, match="nvmlInit: NoPermission"):
        make(host, tmp_path).collect()


def test_device_count_failing_is_an_error(tmp_path: Path) -> None:
    host = fake.pcie_host()
    host.errors["nvmlDeviceGetCount"] = pynvml.NVML_ERROR_UNKNOWN
    with pytest.raises(CollectorError, match="nvmlDeviceGetCount: Unknown"):
        make(host, tmp_path).collect()


def test_no_pynvml_module_is_no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    collector = gpus.GpuCollector(clock=FakeClock(), sys_root=tmp_path)
    with pytest.raises(NoData) as exc:
        collector.collect()
    assert exc.value.reason.startswith("nvml-unavailable: pynvml not installed")


def test_zero_gpus_is_no_data(tmp_path: Path) -> None:
    with pytest.raises(NoData) as exc:
        make(fake.FakeNvml([]), tmp_path).collect()
    assert exc.value.reason == "no-gpus"


def test_nvml_initialised_once_and_shut_down_on_close(pcie_sys: Path) -> None:
    host = fake.pcie_host()
    collector = make(host, pcie_sys)
    for _ in range(3):
        collect(collector)
    assert (host.init_calls, host.init_count) == (1, 1)

    collector.close()
    collector.close()
    assert (host.init_count, host.event_sets_freed) == (0, 1)


def test_build_imports_pynvml_lazily_and_reads_the_configured_sys_root(
    pcie_sys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "proc").mkdir()
    settings = AgentSettings(
        paths=HostPaths.under(proc=tmp_path / "proc", sys=pcie_sys), node_name="node-a"
    )
    collector = gpus.build(settings, FakeClock())
    assert collector.name == gpus.NAME == "gpus"
    monkeypatch.setitem(sys.modules, "pynvml", fake.pcie_host())  # what `import pynvml` finds
    assert [d.numa_node for d in collect(collector).devices] == [0, 0, 0, 1]


# ------------------------------------------------------------------ partial failures


def test_lost_gpu_is_unhealthy_and_others_unaffected(pcie_sys: Path) -> None:
    host = fake.pcie_host()
    collector = make(host, pcie_sys)
    collect(collector)
    host.gpus[2].lost = True
    section = collect(collector)

    lost = section.devices[2]
    assert (lost.health, lost.health_reasons) == ("unhealthy", ["gpu-lost"])
    # identity is kept from the earlier cycle, so the coordinator can still name it
    assert (lost.uuid, lost.pci_bus_id, lost.name) == (
        fake.uuid("l40s", 2),
        "00000000:4B:00.0",
        "NVIDIA L40S",
    )
    assert (lost.mem_total_b, lost.util_gpu_pct, lost.ecc_enabled) == (None, None, None)
    assert lost.numa_node == 0  # sysfs still knows where the slot is
    assert section.topology[2] == [None, None, 0, None]
    assert [row[2] for row in section.topology] == [None, None, 0, None]
    assert section.topology[0] == [0, 10, None, 50]
    for i in (0, 1, 3):
        d = section.devices[i]
        assert (d.health, d.health_reasons) == ("ok", [])
        assert d.mem_total_b == 48 * 2**30
        assert d.uuid == fake.uuid("l40s", i)


def test_gpu_lost_before_ever_being_seen(pcie_sys: Path) -> None:
    host = fake.pcie_host()
    host.gpus[1].errors["nvmlDeviceGetHandleByIndex"] = pynvml.NVML_ERROR_GPU_IS_LOST
    section = collect(make(host, pcie_sys))

    lost = section.devices[1]
    assert (lost.uuid, lost.name, lost.pci_bus_id, lost.numa_node) == ("", "", "", None)
    assert (lost.health, lost.health_reasons) == ("unhealthy", ["gpu-lost"])
    assert section.devices[0].health == "ok"


def test_unexpected_error_on_one_field_is_noted_not_fatal(pcie_sys: Path) -> None:
    host = fake.pcie_host()
    host.gpus[1].errors["nvmlDeviceGetUtilizationRates"] = pynvml.NVML_ERROR_UNKNOWN
    section = collect(make(host, pcie_sys))

    d = section.devices[1]
    assert (d.util_gpu_pct, d.util_mem_pct) == (None, None)
    assert (d.health, d.health_reasons) == ("ok", ["utilization: Unknown"])
    assert d.mem_total_b == 48 * 2**30
    assert section.devices[2].util_gpu_pct == 50.0


def test_gpu_without_access_reports_the_reason(pcie_sys: Path) -> None:
    """nvmlDeviceGetCount counts GPUs this process may not open."""
    host = fake.pcie_host()
    host.gpus[3].errors["nvmlDeviceGetHandleByIndex"] = pynvml.NVML_ERROR_NO_PERMISSION
    section = collect(make(host, pcie_sys))

    d = section.devices[3]
    assert (d.uuid, d.mem_total_b, d.nvlinks_active) == ("", None, None)
    assert d.health_reasons == ["handle: NoPermission"]
    assert section.topology[3] == [None, None, None, 0]
    assert len(section.devices) == 4


# ----------------------------------------------------------------------- health


def test_critical_xids_counted_and_application_xids_ignored(h100_sys: Path) -> None:
    host = fake.h100_host()
    collector = make(host, h100_sys)
    collect(collector)  # registers for events
    for xid in (13, 31, 43, 45, 68, 109):
        host.emit_xid(3, xid)
    host.emit_xid(6, 79)
    host.emit_xid(6, 48)
    host.emit(1, pynvml.nvmlEventTypeDoubleBitEccError)
    section = collect(collector)

    assert (section.devices[3].xid_critical, section.devices[3].last_xid) == (0, None)
    assert section.devices[3].health == "ok"
    assert (section.devices[1].xid_critical, section.devices[1].health) == (0, "ok")
    six = section.devices[6]
    assert (six.xid_critical, six.last_xid) == (2, 48)
    assert (six.health, six.health_reasons) == ("unhealthy", ["xid-critical: 2 (last 48)"])
    assert set(host.wait_timeouts) == {0}  # draining never blocks a collection

    host.emit_xid(6, 94)
    six = collect(collector).devices[6]
    assert (six.xid_critical, six.last_xid) == (3, 94)


def test_recent_xids_are_listed_newest_first_with_their_age(h100_sys: Path) -> None:
    host = fake.h100_host()
    clock = FakeClock(wall_s=NOW)
    collector = gpus.GpuCollector(clock=clock, sys_root=h100_sys, nvml=host)
    collect(collector)
    host.emit_xid(2, 48)
    host.emit_xid(2, 13)  # application-level: neither counted nor listed
    collect(collector)
    clock.advance(90.0)
    host.emit_xid(2, 79)
    section = collect(collector)
    clock.advance(10.0)
    later = collect(collector)

    assert [(x.xid, x.age_s) for x in section.devices[2].xid_recent] == [(79, 0.0), (48, 90.0)]
    assert [(x.xid, x.age_s) for x in later.devices[2].xid_recent] == [(79, 10.0), (48, 100.0)]
    assert all(d.xid_recent == [] for i, d in enumerate(later.devices) if i != 2)


def test_recent_xids_keep_only_the_latest(h100_sys: Path) -> None:
    host = fake.h100_host()
    collector = make(host, h100_sys)
    collect(collector)
    for n in range(schema.MAX_RECENT_XIDS + 5):
        host.emit_xid(0, 1000 + n)
    zero = collect(collector).devices[0]

    assert zero.xid_critical == schema.MAX_RECENT_XIDS + 5
    assert [x.xid for x in zero.xid_recent] == [
        1000 + n for n in range(schema.MAX_RECENT_XIDS + 4, 4, -1)
    ]


def test_retired_pages_are_counted_over_both_causes(pcie_sys: Path) -> None:
    host = fake.pcie_host()
    sbe = pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
    dbe = pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
    host.gpus[0].retired_pages = {sbe: [0x1000, 0x2000, 0x3000], dbe: [0x9000]}
    host.gpus[1].retired_pages = {}
    section = collect(make(host, pcie_sys))

    assert [d.retired_pages for d in section.devices] == [4, 0, None, None]
    assert section.devices[0].health == "ok"  # a count alone is for the coordinator to judge


def test_lost_gpu_says_so_in_its_own_field(pcie_sys: Path) -> None:
    host = fake.pcie_host()
    host.gpus[1].lost = True
    section = collect(make(host, pcie_sys))

    assert [d.lost for d in section.devices] == [False, True, False, False]


def test_xid_from_a_gpu_that_then_falls_off_the_bus(h100_sys: Path) -> None:
    host = fake.h100_host()
    collector = make(host, h100_sys)
    collect(collector)
    host.emit_xid(4, 79)
    host.gpus[4].lost = True  # its UUID can no longer be read for the event
    section = collect(collector)

    four = section.devices[4]
    assert (four.xid_critical, four.last_xid) == (1, 79)
    assert four.health_reasons == ["gpu-lost", "xid-critical: 1 (last 79)"]
    assert four.uuid == fake.uuid("h100", 4)
    assert section.devices[4].nvlinks_active is None
    assert section.nvlinks[4] == [0] * 8
    assert section.nvlinks[0] == [0, 18, 18, 18, 0, 18, 18, 18]


@pytest.mark.parametrize(
    ("code", "reasons"),
    [
        (pynvml.NVML_ERROR_NOT_SUPPORTED, []),
        (pynvml.NVML_ERROR_UNKNOWN, ["xid-events: Unknown"]),
    ],
)
def test_event_set_creation_failing(h100_sys: Path, code: int, reasons: list[str]) -> None:
    host = fake.h100_host()
    host.errors["nvmlEventSetCreate"] = code
    collector = make(host, h100_sys)
    section = collect(collector)

    assert [d.health_reasons for d in section.devices] == [reasons] * 8
    assert (host.registered, host.wait_timeouts) == ({}, [])
    del host.errors["nvmlEventSetCreate"]
    collect(collector)
    # NotSupported is final; any other failure is retried on the next cycle
    assert len(host.registered) == (0 if code == pynvml.NVML_ERROR_NOT_SUPPORTED else 8)


def test_event_registration_failure_is_noted_and_retried(h100_sys: Path) -> None:
    host = fake.h100_host()
    host.errors["nvmlDeviceRegisterEvents"] = pynvml.NVML_ERROR_UNKNOWN
    collector = make(host, h100_sys)
    section = collect(collector)

    assert [d.health_reasons for d in section.devices] == [["xid-events: Unknown"]] * 8
    del host.errors["nvmlDeviceRegisterEvents"]
    host.emit_xid(0, 48)  # not registered yet: lost, as on a real driver
    section = collect(collector)
    assert [d.health_reasons for d in section.devices] == [[]] * 8
    assert len(host.registered) == 8
    host.emit_xid(0, 48)
    assert collect(collector).devices[0].xid_critical == 1


def test_events_registered_for_supported_xid_and_ecc_types(h100_sys: Path) -> None:
    host = fake.h100_host()
    host.gpus[2].supported_events = XID | pynvml.nvmlEventTypePState
    collect(make(host, h100_sys))

    wanted = XID | pynvml.nvmlEventTypeDoubleBitEccError | pynvml.nvmlEventTypeSingleBitEccError
    assert host.registered == {i: XID if i == 2 else wanted for i in range(8)}


def test_event_registration_not_supported_is_fine(h100_sys: Path) -> None:
    host = fake.h100_host()
    host.errors["nvmlDeviceRegisterEvents"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    section = collect(make(host, h100_sys))

    assert host.registered == {}
    assert {(d.health, tuple(d.health_reasons)) for d in section.devices} == {("ok", ())}


def test_event_wait_failure_is_noted_on_every_gpu(h100_sys: Path) -> None:
    host = fake.h100_host()
    host.errors["nvmlEventSetWait"] = pynvml.NVML_ERROR_UNKNOWN
    section = collect(make(host, h100_sys))

    assert [d.health_reasons for d in section.devices] == [["xid-events: Unknown"]] * 8
    assert {d.health for d in section.devices} == {"ok"}


def test_memory_health_signals(h100_sys: Path) -> None:
    host = fake.h100_host()
    host.gpus[2].remapped_rows = (0, 1, 1, 0)
    host.gpus[4].remapped_rows = (0, 3, 0, 1)
    host.gpus[7].ecc_uncorrected_volatile = 3
    section = collect(make(host, h100_sys))

    health = [(d.health, d.health_reasons) for d in section.devices]
    assert health[2] == ("degraded", ["row-remap-pending"])
    assert health[4] == ("unhealthy", ["row-remap-failed"])
    assert health[7] == ("unhealthy", ["ecc-uncorrected-volatile: 3"])
    assert all(health[i] == ("ok", []) for i in (0, 1, 3, 5, 6))
    assert section.devices[2].remapped_rows_pending is True
    assert section.devices[7].ecc_uncorrected_volatile == 3


def test_retired_pages_pending_is_degraded(pcie_sys: Path) -> None:
    host = fake.pcie_host()
    host.gpus[0].retired_pages_pending = pynvml.NVML_FEATURE_ENABLED
    section = collect(make(host, pcie_sys))

    assert section.devices[0].retired_pages_pending is True
    assert (section.devices[0].health, section.devices[0].health_reasons) == (
        "degraded",
        ["retired-pages-pending"],
    )
    assert section.devices[1].retired_pages_pending is False


# -------------------------------------------------------------------- real NVML


def _nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def test_real_pynvml_without_the_library_is_no_data(tmp_path: Path) -> None:
    if _nvml_library_present():
        pytest.skip("libnvidia-ml.so.1 is present; this covers hosts without it")
    collector = gpus.GpuCollector(clock=FakeClock(), sys_root=tmp_path)
    with pytest.raises(NoData) as exc:
        collector.collect()
    assert exc.value.reason.startswith("nvml-unavailable")
    collector.close()


@pytest.mark.gpu
def test_real_gpus() -> None:
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded) as e:
        pytest.skip(f"no NVML library or driver: {e}")
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            pytest.skip("no GPU: nvmlDeviceGetCount() == 0")
        collector = gpus.GpuCollector(clock=FakeClock(), sys_root=Path("/sys"))
        try:
            section = codec.validate(collector.collect())
            again = codec.validate(collector.collect())
        finally:
            collector.close()
    finally:
        pynvml.nvmlShutdown()

    assert len(section.devices) == len(again.devices) == count
    assert [d.index for d in section.devices] == list(range(count))
    for d in section.devices:
        assert d.uuid.startswith("GPU-"), d.uuid
        assert d.mem_total_b is None or d.mem_total_b > 0
        assert d.health in ("ok", "degraded", "unhealthy")
    assert any(d.mem_total_b for d in section.devices)
    for matrix in (section.topology, section.nvlinks):
        assert len(matrix) == count and all(len(row) == count for row in matrix)
    assert all(section.topology[i][i] == 0 for i in range(count))
