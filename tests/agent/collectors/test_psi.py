from __future__ import annotations

from pathlib import Path

import pytest

from agent import kernelfiles
from agent.collectors import psi
from agent.collectors.base import NoData
from common import codec
from common.schema import PsiGroup, PsiResource, is_absent
from tests.hosts import FIXTURES, host_paths


def _collector(root: Path, clock) -> psi.PsiCollector:
    paths = host_paths(root)
    return psi.PsiCollector(paths.proc, paths.cgroup, clock)


def test_parse_pressure_reads_the_kernel_format():
    text = (
        "some avg10=2.54 avg60=0.71 avg300=0.58 total=3492186\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert kernelfiles.parse_pressure(text) == {
        "some": (2.54, 0.71, 0.58, 3492186),
        "full": (0.0, 0.0, 0.0, 0),
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "some avg10=2.54 avg60=0.71\n",
        "some avg10=x avg60=0.71 avg300=0.58 total=1\n",
        "most avg10=1 avg60=1 avg300=1 total=1\n",
        "some avg10=1 avg60=1 avg300=1 total=-5\n",
        "some avg10=101 avg60=1 avg300=1 total=5\n",
        "some avg10=1 avg60=1 avg300=1 total=5 extra=1\n",
        "some avg10=1 avg60=1 avg300=1 total=5\nsome avg10=1 avg60=1 avg300=1 total=5\n",
        "\x00\x01garbage",
    ],
)
def test_parse_pressure_rejects_garbage(text):
    with pytest.raises(ValueError):
        kernelfiles.parse_pressure(text)


def test_v2_node_reports_system_and_per_qos_cgroup_pressure(clock):
    root = FIXTURES / "k8s-v2-node"
    section = _collector(root, clock).collect()
    codec.validate(section)
    cpu = section.system.cpu
    assert isinstance(cpu, PsiResource)
    assert cpu.some.avg10_pct == 12.40 and cpu.some.total_us == 1_845_220_114
    assert cpu.full is None, "system cpu full is undefined and must not be reported"
    irq = section.system.irq
    assert isinstance(irq, PsiResource) and irq.some is None
    assert irq.full.total_us == 411_093
    assert isinstance(section.cgroups, dict)
    assert set(section.cgroups) == {"kubepods", "burstable", "besteffort"}
    besteffort = section.cgroups["besteffort"]
    assert isinstance(besteffort, PsiGroup)
    assert besteffort.path.endswith("kubepods.slice/kubepods-besteffort.slice")
    # cgroup cpu full is meaningful (throttled BE work) and is kept.
    assert besteffort.cpu.full.avg10_pct == 24.80
    assert besteffort.cpu.full.total_us == 1_704_221_114
    assert section.cgroups["kubepods"].memory.some.total_us == 7_003_112


def test_cgroupfs_driver_paths_are_found(clock):
    section = _collector(FIXTURES / "two-numa-hugepages", clock).collect()
    assert isinstance(section.cgroups, dict)
    burstable = section.cgroups["burstable"]
    assert burstable.path.endswith("sys/fs/cgroup/kubepods/burstable")
    assert burstable.memory.some.avg10_pct == 2.10
    assert is_absent(burstable.irq)


def test_rates_come_from_total_deltas(host_copy, clock):
    root = host_copy("k8s-v2-node")
    collector = _collector(root, clock)
    first = collector.collect()
    assert first.interval_s is None and first.system.io.some.rate_pct is None
    io = root / "proc" / "pressure" / "io"
    # 2 s later io some grew by 50 ms (2.5 %) and io full by 3 s (clamped to 100 %).
    io.write_text(
        "some avg10=2.11 avg60=1.53 avg300=1.20 total=88263009\n"
        "full avg10=1.02 avg60=0.77 avg300=0.61 total=54402777\n"
    )
    clock.advance(2.0)
    second = collector.collect()
    assert second.interval_s == pytest.approx(2.0)
    assert second.system.io.some.rate_pct == pytest.approx(2.5)
    assert second.system.io.full.rate_pct == 100.0
    assert second.system.memory.some.rate_pct == 0.0


def test_counter_reset_gives_no_rate(host_copy, clock):
    root = host_copy("k8s-v2-node")
    collector = _collector(root, clock)
    collector.collect()
    cg_cpu = root / "sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/cpu.pressure"
    cg_cpu.write_text(
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=10\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"
    )
    clock.advance(10)
    section = collector.collect()
    assert section.cgroups["besteffort"].cpu.some.rate_pct is None
    assert section.cgroups["kubepods"].cpu.some.rate_pct == 0.0


def test_kernel_without_psi_is_absent_not_zero(clock):
    with pytest.raises(NoData, match="psi-unsupported"):
        _collector(FIXTURES / "no-psi-v1", clock).collect()


def test_cgroup_v1_has_no_per_cgroup_psi(host_copy, clock):
    root = host_copy("no-psi-v1")
    (root / "proc" / "pressure").mkdir()
    for name in ("cpu", "memory", "io"):
        (root / "proc" / "pressure" / name).write_text(
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"
        )
    section = _collector(root, clock).collect()
    assert is_absent(section.cgroups)
    assert section.cgroups.startswith("cgroup-v1")


def test_garbage_in_one_file_makes_only_that_resource_absent(host_copy, clock):
    root = host_copy("k8s-v2-node")
    (root / "proc" / "pressure" / "memory").write_text("some avg10=banana\n")
    section = _collector(root, clock).collect()
    codec.validate(section)
    assert is_absent(section.system.memory)
    assert "memory" in section.system.memory
    assert section.system.cpu.some.total_us == 1_845_220_114


def test_unreadable_cgroup_pressure_file_is_absent(host_copy, clock):
    root = host_copy("k8s-v2-node")
    io = root / "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/io.pressure"
    io.unlink()
    io.mkdir()  # reading a directory fails like an unreadable file does
    section = _collector(root, clock).collect()
    burstable = section.cgroups["burstable"]
    assert is_absent(burstable.io) and burstable.io.startswith("error:")
    assert burstable.cpu.some.avg10_pct == 6.10


def _read_totals(path: Path) -> dict[str, int]:
    out = {}
    for line in path.read_text().splitlines():
        kind, *pairs = line.split()
        out[kind] = int(dict(p.split("=") for p in pairs)["total"])
    return out


@pytest.mark.skipif(not Path("/proc/pressure").is_dir(), reason="this kernel has no PSI")
def test_real_proc_pressure_agrees_with_an_independent_read(clock):
    before = {r: _read_totals(Path("/proc/pressure") / r) for r in ("cpu", "memory", "io")}
    section = psi.PsiCollector(Path("/proc"), Path("/sys/fs/cgroup"), clock).collect()
    after = {r: _read_totals(Path("/proc/pressure") / r) for r in ("cpu", "memory", "io")}
    codec.validate(section)
    for resource in ("cpu", "memory", "io"):
        reported = getattr(section.system, resource)
        assert before[resource]["some"] <= reported.some.total_us <= after[resource]["some"]
        if resource != "cpu":
            assert before[resource]["full"] <= reported.full.total_us <= after[resource]["full"]
    irq_exists = Path("/proc/pressure/irq").exists()
    assert is_absent(section.system.irq) != irq_exists
