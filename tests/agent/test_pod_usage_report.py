"""Per-pod use travels in its own report field, so the pods section can go ``unchanged``.

The real agent (:class:`agent.main.Agent` with its pods collector) lists pods from a
kubelet on 127.0.0.1 and reads their use from a written cgroup2 tree driven by a fake
clock; its reports then go through the :class:`~agent.reportdelta.ReportDelta` that
decides what is sent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.hostpaths import HostPaths
from agent.main import Agent
from agent.metrics import AgentMetrics
from agent.reportdelta import UNCHANGED, ReportDelta
from agent.settings import AgentSettings, PodsSettings
from common import codec
from common.schema import NodeReport, PodsSection
from tests.agent.collectors.test_pods import NODE, TOKEN, FakeKube, cluster_pods
from tests.hosts import FakeClock

TRAINER = str(uuid.uuid5(uuid.NAMESPACE_URL, "ml/trainer"))


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    server = FakeKube(cluster_pods())
    yield server
    server.stop()


def make_agent(kube: FakeKube, root: Path, clock: FakeClock) -> Agent:
    token = root / "token"
    token.write_text(TOKEN + "\n")
    cgroup = root / "cgroup"
    cgroup.mkdir()
    (cgroup / "cgroup.controllers").write_text("cpu memory\n")
    settings = AgentSettings(
        paths=HostPaths(proc=root, sys=root, cgroup=cgroup),
        node_name=NODE,
        collectors=("pods",),
        pods=PodsSettings(source="kubelet", kubelet_url=kube.url + "/", token_file=str(token)),
    )
    return Agent(settings, clock, AgentMetrics())


def trainer_used(cgroup: Path, usage_usec: int) -> None:
    """The trainer pod (Burstable) has used ``usage_usec`` of CPU so far."""
    pod_dir = cgroup / f"kubepods/burstable/pod{TRAINER}"
    pod_dir.mkdir(parents=True, exist_ok=True)
    (pod_dir / "cpu.stat").write_text(f"usage_usec {usage_usec}\n")


async def test_same_pods_with_new_use_send_pods_unchanged_and_use_fresh(
    kube: FakeKube, tmp_path: Path
) -> None:
    clock = FakeClock()
    agent = make_agent(kube, tmp_path, clock)
    cgroup = tmp_path / "cgroup"
    delta = ReportDelta(refresh_reports=30)
    sent: list[NodeReport] = []
    try:
        for used_s in (1, 3, 4):  # 2 s, then 1 s of CPU per 2 s cycle
            trainer_used(cgroup, used_s * 1_000_000)
            report = await agent.collect()
            out = delta.outgoing(report)
            delta.delivered(report, out)
            sent.append(codec.decode_report(codec.encode(out)))  # as the coordinator reads it
            clock.advance(2.0)
    finally:
        agent.close()
    first, second, third = sent
    assert isinstance(first.pods, PodsSection)
    assert sorted(p.name for p in first.pods.pods) == ["idle", "trainer", "web"]
    assert (second.pods, third.pods) == (UNCHANGED, UNCHANGED)
    uses = [r.pod_usage for r in sent]
    assert all(isinstance(u, dict) and list(u) == [TRAINER] for u in uses)
    assert [u[TRAINER].cpu_m for u in uses] == [None, 1000, 500]  # type: ignore[index]


async def test_no_pods_section_means_no_pod_use(kube: FakeKube, tmp_path: Path) -> None:
    clock = FakeClock()
    agent = make_agent(kube, tmp_path, clock)
    trainer_used(tmp_path / "cgroup", 1_000_000)
    try:
        assert isinstance((await agent.collect()).pod_usage, dict)
        kube.token = "rotated"  # the kubelet refuses: no pods, so no use of them either
        report = await agent.collect()
    finally:
        agent.close()
    assert isinstance(report.pods, str)
    assert report.pod_usage is None


async def test_without_a_kubepods_tree_pod_use_is_absent(kube: FakeKube, tmp_path: Path) -> None:
    agent = make_agent(kube, tmp_path, FakeClock())  # no kubepods tree under the cgroup root
    try:
        report = await agent.collect()
    finally:
        agent.close()
    assert isinstance(report.pods, PodsSection)
    assert report.pod_usage == "no-kubepods-cgroup"
