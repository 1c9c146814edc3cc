"""crane-scheduler's load annotations: its value format, the windows behind each key, the
hot value from bindings, and the publisher writing them damped in its own patches."""

from __future__ import annotations

import asyncio
import dataclasses

import msgspec

from coordinator.config import CoordinatorSettings, PublisherSettings
from coordinator.consolidation import crane
from coordinator.kube import publisher
from coordinator.kube.leader import Fence
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.state.podrequest import PodRequest
from hack.bench.ingest import gpu_node
from tests.hosts import FakeClock
from tests.kit import build_report

NODE = "gpu-node-00000"
GIB = 2**30
AT = 1_790_000_000.0  # 2026-09-21T14:13:20Z


def report(clock: FakeClock, cpu_pct: float, mem_available_gib: float = 25.0):  # noqa: ANN201
    """A fresh report of ``cpu_pct`` CPU in use and 100 GiB of memory, this much available."""
    base = build_report(NODE, now=clock.wall())
    usage = base.usage
    cpu = msgspec.structs.replace(usage.cpu, used_pct=cpu_pct)
    memory = msgspec.structs.replace(
        usage.memory, total_b=100 * GIB, available_b=int(mem_available_gib * GIB)
    )
    return msgspec.structs.replace(
        base, usage=msgspec.structs.replace(usage, cpu=cpu, memory=memory)
    )


def bound(name: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"nodeName": NODE, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def rig(**publisher_settings: object) -> tuple[LiveCluster, crane.CraneLoad, FakeClock]:
    clock = FakeClock(mono_s=86400.0)  # on a bucket boundary of every window
    settings = dataclasses.replace(
        CoordinatorSettings(), publisher=PublisherSettings(**publisher_settings)
    )
    cluster = LiveCluster(settings, clock, CoordinatorMetrics())
    cluster.replace_nodes([gpu_node(NODE)])
    return cluster, crane.CraneLoad(cluster, clock), clock


def run_for(
    cluster: LiveCluster, load: crane.CraneLoad, clock: FakeClock, seconds: float, cpu: float
) -> None:
    """A report and a sample every 30 s for ``seconds``, the clock left after the last."""
    for _ in range(int(seconds // crane.SAMPLE_S)):
        cluster.apply_report(report(clock, cpu))
        load.sample()
        clock.advance(crane.SAMPLE_S)


def test_values_are_crane_schedulers_format() -> None:
    # strconv.FormatFloat(v, 'f', 5, 64) and the layout 2006-01-02T15:04:05Z; ints as Itoa.
    assert crane.value(0.35, AT) == "0.35000,2026-09-21T14:13:20Z"
    assert crane.value(0.123456, AT) == "0.12346,2026-09-21T14:13:20Z"
    assert crane.value(1.0, AT) == "1.00000,2026-09-21T14:13:20Z"
    assert crane.value(3, AT) == "3,2026-09-21T14:13:20Z"
    assert crane.KEYS == (
        "cpu_usage_avg_5m", "cpu_usage_max_avg_1h", "cpu_usage_max_avg_1d",
        "mem_usage_avg_5m", "mem_usage_max_avg_1h", "mem_usage_max_avg_1d", "node_hot_value",
    )  # fmt: skip


def test_the_5_minute_mean_and_the_highest_5_minute_means_of_the_hour_and_day() -> None:
    cluster, load, clock = rig()
    run_for(cluster, load, clock, 300, cpu=40.0)  # one 5-minute span at 40 %
    run_for(cluster, load, clock, 300, cpu=10.0)  # the next at 10 %
    clock.advance(-crane.SAMPLE_S)  # now: the last sample's time, inside the second span
    values, numbers = load.annotations(NODE, AT)
    assert values["cpu_usage_avg_5m"] == "0.10000,2026-09-21T14:13:20Z"
    assert values["cpu_usage_max_avg_1h"] == "0.40000,2026-09-21T14:13:20Z"
    assert values["cpu_usage_max_avg_1d"] == "0.40000,2026-09-21T14:13:20Z"
    assert values["mem_usage_avg_5m"] == "0.75000,2026-09-21T14:13:20Z"  # 1 − 25/100
    assert numbers["crane.cpu_usage_avg_5m"] == 10.0
    clock.advance(crane.SAMPLE_S)
    # An hour and more at 20 %: the 40 % span has left the hour, not the day.
    run_for(cluster, load, clock, 3900, cpu=20.0)
    clock.advance(-crane.SAMPLE_S)
    values, _ = load.annotations(NODE, AT)
    assert values["cpu_usage_avg_5m"].startswith("0.20000,")
    assert values["cpu_usage_max_avg_1h"].startswith("0.20000,")
    assert values["cpu_usage_max_avg_1d"].startswith("0.40000,")


def test_the_day_keeps_the_5_minute_mean_not_the_highest_sample() -> None:
    cluster, load, clock = rig()
    # One span: nine samples at 10 % and one at 100 %: its mean is 19 %.
    for cpu in [10.0] * 9 + [100.0]:
        run_for(cluster, load, clock, 30, cpu=cpu)
    run_for(cluster, load, clock, 3900, cpu=5.0)  # the span leaves the hour
    clock.advance(-crane.SAMPLE_S)
    values, _ = load.annotations(NODE, AT)
    assert values["cpu_usage_max_avg_1h"].startswith("0.05000,")
    assert values["cpu_usage_max_avg_1d"].startswith("0.19000,")


def test_hot_value_counts_bindings_as_cranes_policy_does() -> None:
    cluster, load, clock = rig()
    for i in range(3):  # bound before the first sample: not counted as recent bindings
        cluster.upsert_pod(bound(f"old-{i}"))
    load.sample()
    assert load.hot_value(NODE) == 0
    for i in range(6):
        cluster.upsert_pod(bound(f"new-{i}"))
    clock.advance(30)
    load.sample()
    assert load.hot_value(NODE) == 6 // 5 + 6 // 2  # 4
    clock.advance(60)  # a minute after the sample that saw them: only the 5-minute range
    load.sample()
    assert load.hot_value(NODE) == 1
    assert load.annotations(NODE, AT)[0]["node_hot_value"] == "1,2026-09-21T14:13:20Z"
    clock.advance(240)  # five minutes after
    load.sample()
    assert load.hot_value(NODE) == 0


def test_a_pod_only_assumed_there_is_no_binding() -> None:
    cluster, load, clock = rig()
    load.sample()
    for i in range(2):  # the extender ranked the node first; no watch says it is bound
        cluster.assume(f"uid-a{i}", PodRequest(f"team/a{i}", 1000, GIB, 0, 0), NODE)
    clock.advance(30)
    load.sample()
    assert load.hot_value(NODE) == 0


def test_a_node_without_a_fresh_report_gets_its_usage_keys_removed() -> None:
    cluster, load, clock = rig()
    run_for(cluster, load, clock, 60, cpu=30.0)
    values, _ = load.annotations(NODE, AT)
    assert values["cpu_usage_avg_5m"] == "0.30000,2026-09-21T14:13:20Z"
    clock.advance(120)  # past the report TTL
    cluster.expire()
    load.sample()
    values, numbers = load.annotations(NODE, AT)
    usage = dict.fromkeys(crane.KEYS[:-1])
    assert values == {**usage, "node_hot_value": "0,2026-09-21T14:13:20Z"}
    assert numbers == {"crane.node_hot_value": 0.0}


def publisher_rig(**settings: object):  # noqa: ANN201
    cluster, load, clock = rig(**settings)
    patches: list[tuple[str, dict]] = []
    leader = asyncio.Event()
    leader.set()
    fence = Fence(renew_deadline_s=1e6, monotonic=clock.monotonic)
    fence.renewed(clock.monotonic())
    pub = publisher.Publisher(
        cluster, lambda n, body: patches.append((n, body)), cluster.settings.publisher,
        cluster.metrics, leader, fence, extra=load.annotations,
    )  # fmt: skip
    return cluster, load, clock, pub, patches


async def test_the_publisher_writes_them_in_its_patches_damped() -> None:
    cluster, load, clock, pub, patches = publisher_rig(heartbeat_s=300, change_pct=5)
    run_for(cluster, load, clock, 60, cpu=30.0)
    await pub.publish_due(clock.wall(), clock.monotonic())
    (name, body), = patches  # fmt: skip
    values = body["metadata"]["annotations"]
    assert values["cpu_usage_avg_5m"].startswith("0.30000,")
    assert values["mem_usage_max_avg_1d"].startswith("0.75000,")
    assert values["node_hot_value"].startswith("0,")
    assert "stowage.io/fullness" in values  # Stowage's own keys in the same patch
    patches.clear()
    # 30 % → 33 % over the 5 minutes (3 points, under change_pct): no patch.
    run_for(cluster, load, clock, 60, cpu=36.0)
    await pub.publish_due(clock.wall(), clock.monotonic())
    assert patches == []
    # Two new bindings (one point in crane's 1-minute range) move the hot value: due at once.
    cluster.upsert_pod(bound("p1"))
    cluster.upsert_pod(bound("p2"))
    load.sample()
    await pub.publish_due(clock.wall(), clock.monotonic())
    (name, body), = patches  # fmt: skip
    assert body["metadata"]["annotations"]["node_hot_value"].startswith("1,")
    patches.clear()
    # Ten minutes at 60 %: the 5-minute mean moves 27 points, written again.
    run_for(cluster, load, clock, 600, cpu=60.0)
    await pub.publish_due(clock.wall(), clock.monotonic())
    (name, body), = patches  # fmt: skip
    assert body["metadata"]["annotations"]["cpu_usage_avg_5m"].startswith("0.60000,")
