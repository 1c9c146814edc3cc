from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.collectors import numa
from agent.collectors.base import NoData
from agent.kernelfiles import CollectorError
from common import codec
from tests.hosts import FIXTURES

KIB = 1024


def test_two_numa_host(clock):
    section = numa.NumaCollector(FIXTURES / "two-numa-hugepages" / "sys", clock).collect()
    codec.validate(section)
    assert [n.node for n in section.nodes] == [0, 1]
    node0, node1 = section.nodes
    assert (node0.cpus, node0.cpu_count, node0.distances) == ("0-31", 32, [10, 21])
    assert (node1.cpus, node1.cpu_count, node1.distances) == ("32-63", 32, [21, 10])
    assert node1.mem_total_b == 132_120_844 * KIB
    assert node1.mem_free_b == 39_219_896 * KIB
    # available = free + active file + inactive file + reclaimable slab
    assert node1.mem_available_b == (39_219_896 + 14_103_780 + 19_089_104 + 2_008_204) * KIB


def test_kernel_without_numa_is_absent(tmp_path, clock):
    (tmp_path / "devices" / "system").mkdir(parents=True)
    with pytest.raises(NoData, match="numa-unsupported"):
        numa.NumaCollector(tmp_path, clock).collect()


def test_broken_node_files_are_a_collector_error(tmp_path, clock):
    shutil.copytree(FIXTURES / "two-numa-hugepages" / "sys", tmp_path / "sys")
    (tmp_path / "sys/devices/system/node/node1/distance").write_text("21\n")
    with pytest.raises(CollectorError, match="distance"):
        numa.NumaCollector(tmp_path / "sys", clock).collect()
    (tmp_path / "sys/devices/system/node/node1/distance").write_text("21 10\n")
    (tmp_path / "sys/devices/system/node/node1/cpulist").write_text("32-x\n")
    with pytest.raises(CollectorError, match="node1"):
        numa.NumaCollector(tmp_path / "sys", clock).collect()


def test_real_sysfs_agrees_with_an_independent_read(clock):
    root = Path("/sys/devices/system/node")
    section = numa.NumaCollector(Path("/sys"), clock).collect()
    codec.validate(section)
    online = root.joinpath("online").read_text().strip()
    ids = sorted(int(p.name[4:]) for p in root.glob("node[0-9]*"))
    assert [n.node for n in section.nodes] == ids
    assert online.split("-")[0] == str(ids[0])
    for node in section.nodes:
        directory = root / f"node{node.node}"
        assert node.cpus == directory.joinpath("cpulist").read_text().strip()
        assert node.distances == [
            int(x) for x in directory.joinpath("distance").read_text().split()
        ]
        meminfo = directory.joinpath("meminfo").read_text()
        total_kb = next(int(line.split()[3]) for line in meminfo.splitlines() if "MemTotal" in line)
        assert node.mem_total_b == total_kb * KIB
        assert 0 < node.mem_free_b <= node.mem_available_b <= node.mem_total_b
