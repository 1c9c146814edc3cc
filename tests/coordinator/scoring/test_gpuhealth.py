"""Unhealthy GPUs are not offered to new GPU pods: from the agent's report through the
coordinator's state to the filter's verdict and its reason, and back once the condition
clears."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from agent.collectors import gpus
from common import codec
from common.schema import GpuDevice, NodeReport, XidSeen
from coordinator.config import (
    CoordinatorSettings,
    GpuHealthSettings,
    PolicySettings,
    SignalSettings,
)
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.scoring import gpuhealth
from coordinator.state.podrequest import PodRequest
from coordinator.state.signals import GpuFault
from hack.bench.ingest import gpu_node
from tests.agent.collectors import fake_nvml as fake
from tests.hosts import FakeClock
from tests.kit import build_report

GIB = 2**30
SICK, WELL = "gpu-node-00000", "gpu-node-00001"
HEALTH = GpuHealthSettings()


def pod(gpus: int, milli: int = 1000) -> PodRequest:
    return PodRequest(f"ns/p{gpus}", cpu_m=1000, mem_b=GIB, gpus=gpus, gpu_milli=milli)


def report(node: str, seq: int = 0, **faults: dict[str, Any]) -> NodeReport:
    """``build_report``'s 8-GPU node, the devices named ``gpu<k>`` given those fields."""
    base = build_report(node, seq=seq)
    gpus = base.gpus
    assert not isinstance(gpus, str)
    devices: list[GpuDevice] = []
    for d in gpus.devices:
        devices.append(msgspec.structs.replace(d, **faults.get(f"gpu{d.index}", {})))
    return msgspec.structs.replace(base, gpus=msgspec.structs.replace(gpus, devices=devices))


def live(settings: GpuHealthSettings = HEALTH) -> LiveCluster:
    cluster = LiveCluster(
        CoordinatorSettings(
            policy=PolicySettings(name="stowage"), signals=SignalSettings(gpu_health=settings)
        ),
        FakeClock(),
        CoordinatorMetrics(),
    )
    cluster.replace_nodes([gpu_node(SICK), gpu_node(WELL)])
    assert cluster.apply_report(report(WELL))
    return cluster


XID_79 = {"xid_recent": [XidSeen(xid=79, age_s=40.0)], "xid_critical": 1, "last_xid": 79}


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (XID_79, "XID 79 40s ago"),
        ({"ecc_uncorrected_volatile": 2}, "2 uncorrectable ECC errors"),
        ({"remapping_failed": True}, "row remapping failed"),
        ({"remapped_rows_pending": True}, "memory repair pending a GPU reset"),
        ({"retired_pages_pending": True}, "memory repair pending a GPU reset"),
        ({"retired_pages": 61}, "61 retired pages > 60"),
        ({"lost": True}, "fell off the bus"),
    ],
)
def test_each_condition_takes_the_gpu_out(fields: dict[str, Any], reason: str) -> None:
    cluster = live()
    cluster.apply_report(report(SICK, gpu3=fields))
    eight = cluster.filter(pod(8), [SICK, WELL])

    assert eight.passing == [WELL]
    assert eight.unresolvable == {
        SICK: f"GPU health: 7 healthy GPUs < 8 requested (GPU 3: {reason})"
    }
    assert cluster.filter(pod(7), [SICK, WELL]).passing == [SICK, WELL]  # 7 healthy remain


@pytest.mark.parametrize(
    "fields",
    [
        {"xid_recent": [XidSeen(xid=79, age_s=3600.0)]},  # out of the window
        {"xid_recent": [XidSeen(xid=94, age_s=5.0)]},  # ignored below
        {"ecc_uncorrected_volatile": 0, "remapped_rows_pending": False},
        {"retired_pages": 60},  # at the limit, not above
    ],
)
def test_within_the_thresholds_the_gpu_is_offered(fields: dict[str, Any]) -> None:
    cluster = live(GpuHealthSettings(ignored_xids=[94]))
    cluster.apply_report(report(SICK, gpu3=fields))

    assert cluster.filter(pod(8), [SICK, WELL]).passing == [SICK, WELL]


def test_a_node_whose_every_gpu_is_unhealthy_takes_no_gpu_pod_but_cpu_pods() -> None:
    cluster = live()
    cluster.apply_report(report(SICK, **{f"gpu{k}": {"lost": True} for k in range(8)}))
    share = cluster.filter(pod(1, 250), [SICK, WELL])

    assert share.passing == [WELL]
    assert share.unresolvable[SICK].startswith("GPU health: 0 healthy GPUs < 1 requested")
    assert "4 more" in share.unresolvable[SICK]  # GPUs past the fourth are counted, not named
    cpu_only = PodRequest("ns/cpu", cpu_m=1000, mem_b=GIB)
    assert cluster.filter(cpu_only, [SICK, WELL]).passing == [SICK, WELL]


def test_a_partly_unhealthy_node_counts_only_its_healthy_gpus_with_room() -> None:
    cluster = live()
    cluster.apply_report(report(SICK, gpu0=XID_79, gpu1=XID_79))
    state = cluster.state
    assert state is not None
    i = state.index[SICK]
    state.gpu_free[i, 2:8] = 0  # the six healthy GPUs are busy; the two sick ones idle
    two = cluster.filter(pod(2), [SICK])

    assert two.passing == []
    assert two.failed == {
        SICK: "GPU health: 0 healthy GPUs with 1000 milli free < 2 requested"
        " (GPU 0: XID 79 40s ago; GPU 1: XID 79 40s ago)"
    }
    assert two.unresolvable == {}  # evicting from the healthy GPUs would make room


def test_the_gpu_comes_back_once_its_agent_stops_reporting_the_condition() -> None:
    cluster = live()
    cluster.apply_report(report(SICK, seq=1, gpu5={"ecc_uncorrected_volatile": 1}))
    assert cluster.filter(pod(8), [SICK]).passing == []
    cluster.clock.advance(10.0)  # type: ignore[attr-defined]
    cluster.apply_report(report(SICK, seq=2))  # a GPU reset cleared the volatile count

    assert cluster.filter(pod(8), [SICK]).passing == [SICK]


def test_switched_off_every_gpu_is_offered() -> None:
    cluster = live(GpuHealthSettings(enabled=False))
    cluster.apply_report(report(SICK, gpu3={"lost": True}))

    assert cluster.filter(pod(8), [SICK, WELL]).passing == [SICK, WELL]


def test_explain_shows_the_verdict() -> None:
    cluster = live()
    cluster.apply_report(report(SICK, gpu3={"remapping_failed": True}))

    assert cluster.explain(pod(8), SICK)["filter"] == (
        "GPU health: 7 healthy GPUs < 8 requested (GPU 3: row remapping failed)"
    )


def test_only_gpus_with_something_to_judge_are_carried() -> None:
    cluster = live()
    cluster.apply_report(report(SICK, gpu6={"ecc_uncorrected_volatile": 3, "retired_pages": 2}))

    assert cluster.signals[WELL].gpu_faults == ()
    assert cluster.signals[SICK].gpu_faults == (
        GpuFault(index=6, ecc_uncorrected=3, retired_pages=2),
    )


def test_several_conditions_and_recent_xids_in_one_reason() -> None:
    fault = GpuFault(
        index=0,
        xids=((48, 12.4), (79, 30.0), (31, 4000.0)),
        ecc_uncorrected=1,
        remap_failed=True,
    )

    assert gpuhealth.why_unhealthy(fault, HEALTH) == (
        "row remapping failed, XID 48 12s ago (+1 more), 1 uncorrectable ECC errors"
    )
    assert gpuhealth.why_unhealthy(GpuFault(index=0, repair_pending=True), HEALTH) is not None
    lenient = GpuHealthSettings(refuse_pending_repair=False)
    assert gpuhealth.why_unhealthy(GpuFault(index=0, repair_pending=True), lenient) is None


def node_counting(gpus: int) -> dict[str, Any]:
    node = gpu_node(SICK)
    node["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)
    return node


def test_a_node_counting_fewer_gpus_than_reported_is_not_judged_twice() -> None:
    # The device plugin has left GPU 3 out of allocatable itself: 7 on the Node, 8 reported.
    cluster = live()
    cluster.upsert_node(node_counting(7))
    cluster.apply_report(report(SICK, gpu3=XID_79))
    assert cluster.filter(pod(7), [SICK]).passing == [SICK]

    cluster.apply_report(report(SICK, seq=1, gpu3=XID_79, gpu5=XID_79))  # one more since
    seven = cluster.filter(pod(7), [SICK])
    assert seven.unresolvable[SICK].startswith("GPU health: 6 healthy GPUs < 7 requested")


def test_time_sliced_gpus_are_judged_only_when_every_gpu_is_unhealthy() -> None:
    cluster = live()
    cluster.upsert_node(node_counting(32))  # 4 replicas of each of the 8 GPUs
    cluster.apply_report(report(SICK, gpu3=XID_79))
    assert cluster.filter(pod(1, 1000), [SICK]).passing == [SICK]

    cluster.apply_report(report(SICK, seq=1, **{f"gpu{k}": {"lost": True} for k in range(8)}))
    assert cluster.filter(pod(1, 1000), [SICK]).passing == []


def test_from_the_agents_collector_over_the_wire_to_the_verdict_and_back(tmp_path: Path) -> None:
    """The real GPU collector over the NVML stand-in, the report encoded and decoded as it
    travels, the coordinator's filter; then the window passes and the GPU is back."""
    host = fake.h100_host()
    agent_clock = FakeClock()
    collector = gpus.GpuCollector(
        clock=agent_clock,
        sys_root=fake.write_sys_numa(
            tmp_path, dict(zip(fake.H100_BUS_IDS, fake.H100_NUMA, strict=True))
        ),
        nvml=host,
    )
    collector.collect()  # registers for XID events
    host.emit_xid(4, 79)
    cluster = live()

    def deliver(seq: int) -> None:
        body = msgspec.structs.replace(build_report(SICK, seq=seq), gpus=collector.collect())
        assert cluster.apply_report(codec.decode_report(codec.encode(body)))

    deliver(1)
    assert cluster.filter(pod(8), [SICK]).unresolvable == {
        SICK: "GPU health: 7 healthy GPUs < 8 requested (GPU 4: XID 79 0s ago)"
    }
    agent_clock.advance(HEALTH.xid_window_s)
    cluster.clock.advance(10.0)  # type: ignore[attr-defined]
    deliver(2)
    assert cluster.filter(pod(8), [SICK]).passing == [SICK]
