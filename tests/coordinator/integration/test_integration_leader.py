"""Two coordinator replicas on one emulated API server: one leads (holds the Lease) and
only it publishes; a crashed leader is replaced once its lease runs out, a cleanly
stopped one hands the Lease over at once, and at no moment do two replicas lead or write.

Which replica wrote what comes from the emulator's request log (each replica's client
has its own User-Agent), not from the replicas' own accounts."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterable, Sequence

import pytest

from coordinator.config import LeaderSettings
from coordinator.kube import leader
from hack.kubeapi.resources import LEASES
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

GIB = rig.GIB
NODES = ("worker-1", "worker-2")
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{rig.NAMESPACE}/leases"


@contextlib.asynccontextmanager
async def leadership_log(replicas: Sequence[rig.Coordinator]) -> AsyncIterator[list[list[str]]]:
    """Every moment at which more than one replica led: each replica's leader flag reports
    its changes as they happen (all on this event loop, so in their true order), and the
    set of leaders is checked after each."""
    overlaps: list[list[str]] = []
    leading = {c.name for c in replicas if c.leading}
    hooks = []
    for replica in replicas:
        flag = replica.services.leader
        assert isinstance(flag, rig.LeaderFlag)

        def changed(now_leading: bool, name: str = replica.name) -> None:
            (leading.add if now_leading else leading.discard)(name)
            if len(leading) > 1:
                overlaps.append(sorted(leading))

        flag.watchers.append(changed)
        hooks.append((flag, changed))
    try:
        yield overlaps
    finally:
        for flag, changed in hooks:
            flag.watchers.remove(changed)


def lease_reads(api: rig.RecordingKubeApi, replica: rig.Coordinator) -> int:
    return sum(
        1
        for s in api.seen
        if s.method == "GET" and s.path.startswith(LEASE_PATH) and s.agent == replica.agent
    )


def runs(agents: Iterable[str]) -> list[str]:
    """Who wrote, in order, consecutive writes by the same replica counted once."""
    out: list[str] = []
    for agent in agents:
        if not out or out[-1] != agent:
            out.append(agent)
    return out


def lease_writers(api: rig.RecordingKubeApi) -> list[str]:
    return runs(
        s.agent
        for s in api.seen
        if s.method in ("POST", "PUT") and s.path.startswith(LEASE_PATH) and s.status < 300
    )


def patch_writers(api: rig.RecordingKubeApi, node: str) -> list[str]:
    return runs(s.agent for s in api.patches(node))


async def two_replicas(
    api: rig.RecordingKubeApi, start: Start, timings: LeaderSettings
) -> tuple[rig.Coordinator, rig.Coordinator]:
    """Replica a, leading and publishing, then replica b, following; both have reports."""
    for node in NODES:
        api.add_node(node, capacity={"cpu": "16", "memory": "64Gi"})
    a = await start(rig.settings(leader=timings), name="a")
    await rig.eventually(lambda: a.leading, "a leads")
    b = await start(rig.settings(leader=timings), name="b")
    await rig.eventually(lambda: b.services.synced.is_set(), "b's caches synced")
    for replica in (a, b):  # agents reach either replica through the Service
        for node in NODES:
            report = rig.node_report(node, free_2mib_b=20 * GIB)
            status, _ = await replica.report(report, api.agent_token(node))
            assert status == 200
    await rig.eventually(
        lambda: all(rig.contiguity(api.annotations(n)) == "20.00Gi" for n in NODES),
        "a published the reports",
    )
    # b keeps finding the Lease held: several of its polls go by without it leading.
    polled = lease_reads(api, b)
    await rig.eventually(lambda: lease_reads(api, b) >= polled + 4, "b polls the Lease")
    return a, b


def assert_only_leads(leading: rig.Coordinator, following: rig.Coordinator) -> None:
    assert leading.leading and not following.leading
    assert leading.metric("stowage_leader") == 1
    assert following.metric("stowage_leader") == 0


async def test_one_replica_leads_and_a_crashed_leader_is_replaced_within_its_lease(
    api: rig.RecordingKubeApi, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    timings = rig.SHORT_LEADER
    a, b = await two_replicas(api, start, timings)
    async with leadership_log((a, b)) as overlaps:
        assert_only_leads(a, b)
        held_by_a = api.lease_holder()
        assert held_by_a
        for node in NODES:
            assert patch_writers(api, node) == [a.agent]  # only the leader published
        assert b.metric("stowage_node_patches_total", {"result": "ok"}) == 0

        # a crashes: everything of it stops at once, and nobody gives the Lease back.
        monkeypatch.setattr(leader.LeaderElector, "_release", lambda self: None)
        await a.stop()
        crashed = time.monotonic()
        assert api.lease_holder() == held_by_a

        # b takes over once a's lease ran out, and publishes every node.
        deadline = timings.lease_duration_s + 1.2 * timings.retry_period_s + 1.0
        await rig.eventually(
            lambda: all(b.agent in patch_writers(api, n) for n in NODES),
            "b publishes after a's lease ran out",
            timeout_s=deadline,
        )
        assert_only_leads(b, a)
    assert overlaps == []
    lease = api.store.get(LEASES, rig.NAMESPACE, rig.LEASE)
    assert lease["spec"]["holderIdentity"] not in ("", held_by_a)
    assert lease["spec"]["leaseTransitions"] == 1
    assert lease_writers(api) == [a.agent, b.agent]
    for node in NODES:
        assert patch_writers(api, node) == [a.agent, b.agent]
        first_of_b = next(p for p in api.patches(node) if p.agent == b.agent)
        assert first_of_b.at > crashed
        assert rig.contiguity(api.annotations(node)) == "20.00Gi"


async def test_a_leader_stopping_cleanly_hands_the_lease_over_at_once(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    """With a 30 s lease, b can lead within a few seconds only if a released it."""
    timings = LeaderSettings(
        lease_name=rig.LEASE, lease_duration_s=30.0, renew_deadline_s=20.0, retry_period_s=0.3
    )
    a, b = await two_replicas(api, start, timings)
    async with leadership_log((a, b)) as overlaps:
        assert_only_leads(a, b)
        await a.stop()
        assert api.lease_holder() == ""  # released on the way out
        await rig.eventually(lambda: b.leading, "b leads", timeout_s=3.0)
        await rig.eventually(
            lambda: all(b.agent in patch_writers(api, n) for n in NODES), "b publishes"
        )
        assert_only_leads(b, a)
    assert overlaps == []
    assert lease_writers(api) == [a.agent, b.agent]
    for node in NODES:
        assert patch_writers(api, node) == [a.agent, b.agent]


async def test_a_leader_cut_off_from_the_api_server_steps_down_before_another_leads(
    api: rig.RecordingKubeApi, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a cannot renew: it stops leading after ``renew_deadline_s``, before b may take over
    (``lease_duration_s`` after it last saw the Lease change); healed, a stays a follower.
    When a leads again it writes every node afresh: b wrote in between, so what a wrote
    in its first term says nothing about what the nodes carry now."""
    timings = LeaderSettings(
        lease_name=rig.LEASE, lease_duration_s=3.0, renew_deadline_s=1.5, retry_period_s=0.3
    )
    a, b = await two_replicas(api, start, timings)
    async with leadership_log((a, b)) as overlaps:
        assert_only_leads(a, b)
        api.cut_off.add(a.agent)
        await rig.eventually(
            lambda: not a.leading,
            "a steps down",
            timeout_s=timings.renew_deadline_s + 1.2 * timings.retry_period_s + 1.0,
        )
        await rig.eventually(
            lambda: all(b.agent in patch_writers(api, n) for n in NODES),
            "b leads and publishes",
            timeout_s=timings.lease_duration_s + 1.2 * timings.retry_period_s + 1.0,
        )
        api.cut_off.discard(a.agent)
        polled = lease_reads(api, a)
        await rig.eventually(lambda: lease_reads(api, a) >= polled + 4, "a polls the Lease")
        assert_only_leads(b, a)
        assert lease_writers(api) == [a.agent, b.agent]
        for node in NODES:
            assert patch_writers(api, node) == [a.agent, b.agent]

        # Only b hears worker-1's next report (the Service sent it there) and publishes it.
        report = rig.node_report(NODES[0], free_2mib_b=10 * GIB, seq=2)
        assert (await b.report(report, api.agent_token(NODES[0])))[0] == 200
        await rig.eventually(
            lambda: rig.contiguity(api.annotations(NODES[0])) == "10.00Gi", "b published"
        )
        # b crashes; a leads again and puts its own view on every node.
        monkeypatch.setattr(leader.LeaderElector, "_release", lambda self: None)
        await b.stop()
        await rig.eventually(
            lambda: all(patch_writers(api, n) == [a.agent, b.agent, a.agent] for n in NODES),
            "a publishes every node again",
            timeout_s=timings.lease_duration_s + 1.2 * timings.retry_period_s + 1.0,
        )
        assert rig.contiguity(api.annotations(NODES[0])) == "20.00Gi"
        assert_only_leads(a, b)
    assert overlaps == []
    assert lease_writers(api) == [a.agent, b.agent, a.agent]
