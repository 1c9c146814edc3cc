from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from agent.collectors import memfrag
from agent.collectors.base import Runner
from agent.metrics import AgentMetrics
from common import codec
from common.schema import HugepagePool, is_absent
from tests.hosts import FIXTURES, host_paths

PAGE = 4096
MIB = 2**20


def _collector(root: Path, clock) -> memfrag.MemfragCollector:
    paths = host_paths(root)
    return memfrag.MemfragCollector(paths.proc, paths.sys, clock, page_size_b=PAGE)


# The Normal zone of a real 6.18 kernel, with the figures worked out in the kernel
# signals reference: 387.5 MiB free, 212 MiB in blocks of order >= 9.
NORMAL = (146, 18, 12, 24, 222, 276, 154, 78, 48, 24, 41)
KERNEL_UNUSABLE = (0.000, 0.001, 0.001, 0.002, 0.004, 0.040, 0.129, 0.228, 0.329, 0.452, 0.576)


def test_contiguity_of_a_real_zone_matches_hand_computed_figures():
    assert memfrag.free_pages(NORMAL) == 99_206  # summed by hand: 387.5 MiB
    assert round(memfrag.free_pages(NORMAL) * PAGE / MIB, 1) == 387.5
    assert memfrag.pages_at_or_above(NORMAL, 9) * PAGE == 212 * MIB
    assert memfrag.largest_block_pages(NORMAL) == 1024
    # The kernel prints the index truncated to thousandths.
    got = tuple(int(memfrag.unusable_index(NORMAL, j) * 1000) / 1000 for j in range(11))
    assert got == KERNEL_UNUSABLE


def test_unusable_index_of_a_fragmented_zone():
    counts = (1000, 200, 0, 50, 0, 0, 0, 0, 0, 0, 0)
    assert memfrag.unusable_index(counts, 3) == pytest.approx(1400 / 1800)  # 0.777
    assert memfrag.unusable_index(counts, 4) == 1.0
    assert memfrag.unusable_index((0,) * 11, 0) == 1.0, "nothing free: nothing usable"
    assert memfrag.largest_block_pages((0,) * 11) == 0


def test_parse_buddyinfo_keeps_nodes_and_zones():
    text = (FIXTURES / "two-numa-hugepages" / "proc" / "buddyinfo").read_text()
    zones = memfrag.parse_buddyinfo(text)
    assert [(z.node, z.zone) for z in zones] == [
        (0, "DMA"),
        (0, "DMA32"),
        (0, "Normal"),
        (1, "Normal"),
    ]
    assert zones[3].counts[:3] == (412_004, 301_221, 180_112)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Node 0, zone   Normal    146     18     12",  # cut mid-line: no final newline
        "Node 0, zone DMA 0 0 0 0 0 0 0 0 1 1 3\nNode 0, zone Normal 146 18 12\n",  # ragged
        "Node 0, zone Normal 146 18 -12\n",
        "Zone Normal 1 2 3\n",
        "Node x, zone Normal 1 2 3\n",
    ],
)
def test_truncated_or_malformed_buddyinfo_is_rejected(text):
    with pytest.raises(ValueError):
        memfrag.parse_buddyinfo(text)


def test_two_numa_host_per_node_contiguity_and_hugepages(clock):
    section = _collector(FIXTURES / "two-numa-hugepages", clock).collect()
    codec.validate(section)
    assert (section.order_2mib, section.order_1gib) == (9, 18)
    node1 = next(n for n in section.nodes if n.node == 1)
    # Node 1 Normal: 2 blocks of order 8, nothing at 9 or 10 -> no 2 MiB block free.
    assert node1.free_b_ge_2mib == 0
    assert node1.largest_block_b == 2**8 * PAGE
    assert node1.unusable_2mib_frac == 1.0
    node0 = next(n for n in section.nodes if n.node == 0)
    # Node 0 sums Normal only (DMA zones are not where pods allocate): 22*2^9 + 9812*2^10 pages.
    assert node0.free_b_ge_2mib == (22 * 2**9 + 9812 * 2**10) * PAGE
    assert node0.free_b_ge_1gib == 0
    pools = section.hugepages
    assert isinstance(pools, list)
    assert (
        HugepagePool(size_b=2 * MIB, node=None, total=2048, free=1700, surplus=0, reserved=100)
        in pools
    )
    assert HugepagePool(size_b=2**30, node=1, total=4, free=1, surplus=0) in pools
    assert section.thp_enabled == "madvise" and section.thp_defrag == "madvise"
    assert section.compaction.counters["compact_stall"] == 9_412
    zone = next(z for z in section.zones if z.node == 1)
    assert zone.low_watermark_b == 10312 * PAGE
    assert sum(zone.free_b_by_order) == zone.free_b


def test_compaction_rates_from_counter_deltas(host_copy, clock):
    root = host_copy("k8s-v2-node")
    collector = _collector(root, clock)
    assert collector.collect().compaction.rates_per_s == {}
    vmstat = root / "proc" / "vmstat"
    vmstat.write_text(vmstat.read_text().replace("compact_stall 312", "compact_stall 342"))
    clock.advance(10)
    rates = collector.collect().compaction.rates_per_s
    assert rates["compact_stall"] == pytest.approx(3.0)
    assert rates["compact_fail"] == 0.0


def test_truncated_buddyinfo_makes_the_section_absent_with_reason(host_copy, clock):
    root = host_copy("k8s-v2-node")
    buddy = root / "proc" / "buddyinfo"
    buddy.write_text(buddy.read_text()[:150])
    runner = Runner(AgentMetrics())
    section = asyncio.run(runner.run_one(_collector(root, clock)))
    assert is_absent(section)
    assert section.startswith("error: parse") and "buddyinfo" in section


def test_missing_hugetlb_and_thp_are_absent_not_zero(host_copy, clock):
    root = host_copy("no-psi-v1")
    shutil.rmtree(root / "sys" / "kernel" / "mm")
    section = _collector(root, clock).collect()
    assert is_absent(section.hugepages)
    assert section.thp_enabled is None


def _independent_buddyinfo() -> dict[tuple[int, str], int]:
    out = {}
    for line in Path("/proc/buddyinfo").read_text().splitlines():
        head, _, counts = line.partition("zone")
        zone, *numbers = counts.split()
        node = int(head.split()[1].rstrip(","))
        out[(node, zone)] = sum(int(c) * 2**k for k, c in enumerate(numbers))
    return out


def test_real_buddyinfo_agrees_with_an_independent_read(clock):
    page = os.sysconf("SC_PAGE_SIZE")
    before = _independent_buddyinfo()
    section = memfrag.MemfragCollector(Path("/proc"), Path("/sys"), clock).collect()
    after = _independent_buddyinfo()
    codec.validate(section)
    assert section.page_size_b == page
    assert {(z.node, z.zone) for z in section.zones} == set(before)
    for zone in section.zones:
        lo = min(before[(zone.node, zone.zone)], after[(zone.node, zone.zone)]) * page
        hi = max(before[(zone.node, zone.zone)], after[(zone.node, zone.zone)]) * page
        # Free lists move between reads on a live system; allow 1 % or 16 MiB of drift.
        slack = max(16 * MIB, hi // 100)
        assert lo - slack <= zone.free_b <= hi + slack
        assert zone.free_b_ge_2mib <= zone.free_b
        assert zone.largest_block_b <= 2 ** (len(zone.free_b_by_order) - 1) * page
