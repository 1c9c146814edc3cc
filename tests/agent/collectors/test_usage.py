from __future__ import annotations

from pathlib import Path

import pytest

from agent.collectors import usage
from agent.kernelfiles import CollectorError
from common import codec
from common.schema import CpuUsage, is_absent
from tests.hosts import FIXTURES

KIB = 1024


def _stat(user, system, idle, iowait, steal, ncpu=4):
    lines = [f"cpu  {user} 0 {system} {idle} {iowait} 0 0 {steal} 0 0"]
    lines += [f"cpu{i} 1 0 1 1 0 0 0 0 0 0" for i in range(ncpu)]
    return "\n".join(lines) + "\nintr 1\n"


def test_cpu_use_needs_two_samples_then_comes_from_deltas(tmp_path, clock):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text((FIXTURES / "k8s-v2-node/proc/meminfo").read_text())
    (proc / "stat").write_text(_stat(1000, 500, 8000, 100, 0))
    collector = usage.UsageCollector(proc, clock)
    first = collector.collect()
    assert is_absent(first.cpu) and first.cpu.startswith("first-sample")
    # +300 user, +100 system, +500 idle, +50 iowait, +50 steal over 10 s on 4 CPUs.
    (proc / "stat").write_text(_stat(1300, 600, 8500, 150, 50))
    clock.advance(10)
    cpu = collector.collect().cpu
    assert isinstance(cpu, CpuUsage)
    assert cpu.window_s == 10
    busy_share = (300 + 100 + 50) / (300 + 100 + 500 + 50 + 50)  # steal counts as busy
    assert cpu.used_pct == pytest.approx(100 * busy_share)
    assert cpu.used_m == round(busy_share * 4000)
    assert cpu.iowait_pct == pytest.approx(5.0)
    assert cpu.steal_pct == pytest.approx(5.0)


def test_counters_going_back_give_no_cpu_figure(tmp_path, clock):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text((FIXTURES / "k8s-v2-node/proc/meminfo").read_text())
    (proc / "stat").write_text(_stat(1000, 500, 8000, 100, 0))
    collector = usage.UsageCollector(proc, clock)
    collector.collect()
    (proc / "stat").write_text(_stat(10, 5, 80, 1, 0))
    clock.advance(10)
    assert is_absent(collector.collect().cpu)


def test_memory_keeps_page_cache_apart_from_the_working_set(clock):
    section = usage.UsageCollector(FIXTURES / "k8s-v2-node" / "proc", clock).collect()
    codec.validate(section)
    mem = section.memory
    total, free = 65_848_316 * KIB, 18_204_112 * KIB
    active_file, inactive_file = 10_231_892 * KIB, 11_884_204 * KIB
    assert mem.total_b == total
    assert mem.used_b == total - free
    assert mem.working_set_b == total - free - inactive_file
    assert mem.page_cache_b == active_file + inactive_file
    assert mem.available_b == 41_120_904 * KIB
    assert mem.swap_used_b == 0


@pytest.mark.parametrize(
    "meminfo", ["MemTotal: 10 kB\n", "MemTotal: ten kB\nMemFree: 1 kB\n", "garbage"]
)
def test_broken_meminfo_is_a_collector_error(tmp_path, clock, meminfo):
    (tmp_path / "stat").write_text(_stat(1, 1, 1, 1, 1))
    (tmp_path / "meminfo").write_text(meminfo)
    with pytest.raises(CollectorError, match="meminfo"):
        usage.UsageCollector(tmp_path, clock).collect()


def test_real_proc_agrees_with_an_independent_read(clock):
    collector = usage.UsageCollector(Path("/proc"), clock)
    collector.collect()
    clock.advance(1)
    section = collector.collect()
    codec.validate(section)
    meminfo = dict(
        (line.split(":")[0], int(line.split()[1]))
        for line in Path("/proc/meminfo").read_text().splitlines()
    )
    assert section.memory.total_b == meminfo["MemTotal"] * KIB
    assert section.memory.working_set_b <= section.memory.used_b <= section.memory.total_b
