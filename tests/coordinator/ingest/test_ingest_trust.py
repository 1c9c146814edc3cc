"""What a report may not bend: a date from the future, GPU matrices that do not fit their
devices. Each is refused with 400 naming the field and changes nothing; the node's next
good report is taken as usual."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from msgspec import structs

from common.schema import GpuSection
from coordinator.state.podrequest import PodRequest
from tests.coordinator.ingest.conftest import IngestRig, pack, plain, report_for

ALLOWANCE_S = 60.0
"""``ingest.max_clock_ahead_s`` by default."""


async def refused(rig: IngestRig, body: object, field: str) -> None:
    """``body`` is a 400 ``invalid`` whose message starts with ``field`` and changes nothing."""
    before = rig.snapshot()
    resp = await rig.post(body)
    assert resp.status == 400, await resp.text()
    assert (await resp.json())["error"].startswith(f"{field}: ")
    assert rig.snapshot() == before
    assert rig.outcomes().get("invalid") == 1


@pytest.mark.parametrize("section", [None, "psi", "gpus"])
async def test_a_report_dated_beyond_the_allowance_is_refused(
    rig: IngestRig, section: str | None
) -> None:
    good = report_for("node-a", now=rig.clock.wall())
    assert (await rig.post(good)).status == 200
    rig.clock.advance(10)
    data = plain(report_for("node-a", seq=2, variant=1, now=rig.clock.wall()))
    ahead = rig.clock.wall() + ALLOWANCE_S + 1
    if section is None:
        data["measured_at"] = ahead
    else:
        data[section]["measured_at"] = ahead
    await refused(rig, pack(data), "measured_at" if section is None else f"{section}.measured_at")


async def test_a_report_at_the_allowance_is_taken(rig: IngestRig) -> None:
    report = report_for("node-a", now=rig.clock.wall() + ALLOWANCE_S)
    assert (await rig.post(report)).status == 200
    assert rig.cluster.freshness.measured_at["node-a"] == report.measured_at


async def test_after_a_refused_far_future_report_the_next_correct_one_is_taken(
    rig: IngestRig,
) -> None:
    future = report_for("node-a", now=rig.clock.wall() + 10 * 365 * 86400.0)
    assert (await rig.post(future)).status == 400
    assert "node-a" not in rig.cluster.signals
    rig.clock.advance(1)
    correct = report_for("node-a", seq=2, variant=1, now=rig.clock.wall())

    assert (await rig.post(correct)).status == 200
    assert rig.cluster.freshness.measured_at["node-a"] == correct.measured_at
    assert rig.cluster.freshness.received_at["node-a"] == rig.clock.monotonic()


async def test_a_report_dated_hours_back_is_fresh_for_the_whole_ttl(rig: IngestRig) -> None:
    """An NTP step back on the node: its reports are old by their date, new by arrival."""
    ttl = rig.services.settings.signals.report_ttl_s
    assert (await rig.post(report_for("node-a", now=rig.clock.wall() - 3 * 3600))).status == 200
    rig.clock.advance(ttl)
    assert rig.cluster.expire() == []
    rig.clock.advance(1)
    assert rig.cluster.expire() == ["node-a"]


# ----------------------------------------------------------------- GPU matrices

TWO_GPUS = PodRequest(name="ns/trainer", cpu_m=1000, mem_b=2**30, gpus=2, gpu_milli=1000)


def two_gpu_scores(rig: IngestRig) -> list[int]:
    """What prioritize answers a 2-GPU pod over the rig's nodes (it must answer)."""
    return rig.cluster.prioritize_each(TWO_GPUS, ["node-a", "node-b"]).tolist()


def ragged(data: dict[str, Any]) -> None:
    data["gpus"]["nvlinks"][3] = [0, 18]


def short(data: dict[str, Any]) -> None:
    data["gpus"]["nvlinks"] = [row[:2] for row in data["gpus"]["nvlinks"][:2]]


def ragged_topology(data: dict[str, Any]) -> None:
    data["gpus"]["topology"][0] = data["gpus"]["topology"][0][:5]


def unknown_device(data: dict[str, Any]) -> None:
    data["gpus"]["devices"][7]["index"] = 8


@pytest.mark.parametrize(
    ("spoil", "field"),
    [
        (ragged, "gpus: nvlinks[3]"),
        (short, "gpus: nvlinks"),
        (ragged_topology, "gpus: topology[0]"),
        (unknown_device, "gpus: devices[7].index"),
    ],
)
async def test_gpu_matrices_not_one_per_device_are_refused_and_prioritize_still_answers(
    rig: IngestRig, spoil: Callable[[dict[str, Any]], None], field: str
) -> None:
    """Such a matrix used to be taken, and every 2-GPU prioritize then failed (500)."""
    good = report_for("node-b", now=rig.clock.wall())
    assert (await rig.post(good, token="token-of-node-b")).status == 200
    scores = two_gpu_scores(rig)
    data = plain(report_for("node-a", now=rig.clock.wall()))
    spoil(data)

    before = rig.snapshot()
    resp = await rig.post(pack(data))
    assert resp.status == 400
    message = (await resp.json())["error"]
    assert message.startswith(f"{field}: ")
    assert rig.snapshot() == before
    assert two_gpu_scores(rig) == scores


async def test_links_for_other_devices_than_the_node_counts_are_not_used(rig: IngestRig) -> None:
    """A self-consistent report of 2 GPUs for a node the API server says has 8 (MIG or
    time-sliced devices, or a wrong report): its NVLinks would be read by the wrong
    device numbers, so the node's links count as not measured."""
    report = report_for("node-a", now=rig.clock.wall())
    assert isinstance(report.gpus, GpuSection)
    two = structs.replace(
        report.gpus,
        devices=report.gpus.devices[:2],
        topology=[row[:2] for row in report.gpus.topology[:2]],
        nvlinks=[row[:2] for row in report.gpus.nvlinks[:2]],
    )
    assert (await rig.post(structs.replace(report, gpus=two))).status == 200
    state = rig.cluster.state
    assert state is not None
    assert rig.cluster.signals["node-a"].gpu_links == ((0, 18), (18, 0))
    assert state.gpu_links[state.index["node-a"]] is None
    assert len(two_gpu_scores(rig)) == 2
