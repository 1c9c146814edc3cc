"""Disk utilisation and await from ``/proc/diskstats``: the parser and the deltas on
recorded files (``tests/fixtures/diskstats``: this VM's kernel 6.18 before and after a
64 MiB direct write, one second apart; an NVMe + SATA host written in the kernel's format
with partitions, a device-mapper and a loop device; the 11-counter format of kernels
before 4.18), the usage collector on them and on this machine's real file."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import diskstats
from agent.collectors import usage
from common import codec
from common.schema import DiskUsage, is_absent
from tests.hosts import FIXTURES, FakeClock

RECORDED = FIXTURES / "diskstats"


def counters(name: str) -> dict[str, diskstats.DiskCounters]:
    return diskstats.parse_diskstats((RECORDED / name).read_text())


def test_nvme_and_sata_over_ten_seconds() -> None:
    disks = {"nvme0n1", "sda", "dm-0", "loop0"}  # what /sys/block lists: no partitions
    got = diskstats.disk_usage(counters("nvme-host-a"), counters("nvme-host-b"), 10.0, disks)

    assert got == [
        DiskUsage(name="dm-0", util_pct=0.0, await_ms=0.0, iops=0.0),
        # 10,000 reads + 8,000 writes in 5,000 + 12,000 ms; in flight 9,900 ms of 10,000
        DiskUsage(name="nvme0n1", util_pct=99.0, await_ms=17000 / 18000, iops=1800.0),
        # 500 reads + 500 writes in 40,000 + 60,000 ms: 100 ms each, saturated
        DiskUsage(name="sda", util_pct=98.0, await_ms=100.0, iops=100.0),
    ]  # fmt: skip


def test_kernels_before_4_18_have_no_discard_counters() -> None:
    got = diskstats.disk_usage(counters("kernel-4.17-a"), counters("kernel-4.17-b"), 10.0, {"sda"})

    assert got == [DiskUsage(name="sda", util_pct=10.0, await_ms=5.0, iops=20.0)]


def test_this_vm_recorded_around_a_direct_write() -> None:
    before, after = counters("vm-6.18-a"), counters("vm-6.18-b")
    got = diskstats.disk_usage(before, after, 1.0, {"vda", "zram0", "loop0"})

    # 7 reads, 192 writes and 2 discards in 3 + 135 + 0 ms; 32 ms in flight.
    assert got == [
        DiskUsage(name="vda", util_pct=3.2, await_ms=pytest.approx(138 / 201), iops=201.0)
    ]


def test_a_counter_going_back_is_no_measurement() -> None:
    got = diskstats.disk_usage(counters("nvme-host-b"), counters("nvme-host-a"), 10.0, {"sda"})

    assert got == []


@pytest.mark.parametrize(
    "line",
    [
        "   8       0 sda 1 2 3",  # too few counters
        "   8       0 sda 1 2 3 4 5 6 7 8 9 ten 11",  # not a number
        "   8       0 sda -1 2 3 4 5 6 7 8 9 10 11",  # negative
        "   8       0 sda 1 2 3 4 5 6 7 8 9 10 " + "9" * 30,  # past 64 bits
    ],
)
def test_a_malformed_line_is_an_error_naming_it(line: str) -> None:
    with pytest.raises(ValueError, match="sda"):
        diskstats.parse_diskstats(line + "\n")


def _host(tmp_path: Path, diskstats_file: str | None, block: tuple[str, ...] = ("sda",)) -> Path:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    proc.mkdir()
    for name in ("meminfo", "stat"):
        (proc / name).write_text((FIXTURES / "k8s-v2-node" / "proc" / name).read_text())
    if diskstats_file is not None:
        (proc / "diskstats").write_text((RECORDED / diskstats_file).read_text())
    for name in block:
        (sys / "block" / name).mkdir(parents=True)
    return tmp_path


def test_the_usage_collector_reports_disks_from_the_second_sample(tmp_path: Path) -> None:
    root = _host(tmp_path, "nvme-host-a", ("nvme0n1", "sda"))
    clock = FakeClock()
    collector = usage.UsageCollector(root / "proc", clock, root / "sys")
    first = collector.collect()
    assert is_absent(first.disks) and first.disks.startswith("first-sample")
    (root / "proc" / "diskstats").write_text((RECORDED / "nvme-host-b").read_text())
    clock.advance(10.0)
    section = codec.validate(collector.collect())

    assert isinstance(section.disks, list)
    assert [(d.name, d.util_pct, d.await_ms) for d in section.disks][1] == ("sda", 98.0, 100.0)


@pytest.mark.parametrize(
    ("contents", "reason"),
    [
        (None, "no-diskstats"),
        ("   8 0 sda 1 2\n", "error: parse"),
    ],
)
def test_a_missing_or_broken_file_costs_only_the_disks(
    tmp_path: Path, contents: str | None, reason: str
) -> None:
    root = _host(tmp_path, None)
    if contents is not None:
        (root / "proc" / "diskstats").write_text(contents)
    section = usage.UsageCollector(root / "proc", FakeClock(), root / "sys").collect()

    assert is_absent(section.disks) and section.disks.startswith(reason)
    assert section.memory.total_b > 0


def test_without_sysfs_no_disk_is_reported(tmp_path: Path) -> None:
    root = _host(tmp_path, "nvme-host-a", ())
    clock = FakeClock()
    collector = usage.UsageCollector(root / "proc", clock, root / "nowhere")
    collector.collect()
    clock.advance(10.0)
    disks = collector.collect().disks

    assert is_absent(disks) and disks.startswith("no-sysfs")


def test_on_this_machine() -> None:
    clock = FakeClock()
    collector = usage.UsageCollector(Path("/proc"), clock, Path("/sys"))
    collector.collect()
    clock.advance(1.0)
    disks = codec.validate(collector.collect()).disks

    assert isinstance(disks, list)
    names = {d.name for d in disks}
    assert names <= {p.name for p in Path("/sys/block").iterdir()}
    assert not any(n.startswith(diskstats.VIRTUAL) for n in names)
