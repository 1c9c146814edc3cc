"""The publisher's patch budget, per-node backoff, global pause and lease fence, on a fake
clock: every figure below is worked out by hand from the documented rules."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import pytest

from coordinator.config import CoordinatorSettings, PublisherSettings
from coordinator.kube import publisher
from coordinator.kube.client import KubeError
from coordinator.kube.leader import Fence
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.ratelimit import TokenBucket
from tests.hosts import FakeClock


def node(name: str) -> dict:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}}


class Rig:
    """A publisher over ``names`` whose patches go to :meth:`patch`; ``refuse`` maps a node
    to the HTTP status its patches fail with (``retry_after`` rides along)."""

    def __init__(self, names: list[str], *, deadline_s: float = 1e6, **settings: float) -> None:
        self.clock = FakeClock()
        config = dataclasses.replace(CoordinatorSettings(), publisher=PublisherSettings(**settings))
        self.cluster = LiveCluster(config, self.clock, CoordinatorMetrics())
        for name in names:
            self.cluster.upsert_node(node(name))
        self.leader = asyncio.Event()
        self.leader.set()
        self.fence = Fence(deadline_s, self.clock.monotonic)
        self.fence.renewed(self.clock.monotonic())
        self.sent: list[tuple[float, str]] = []
        self.refuse: dict[str, tuple[int, float | None]] = {}
        self.pub = publisher.Publisher(
            self.cluster, self.patch, config.publisher, self.cluster.metrics, self.leader,
            self.fence,
        )  # fmt: skip

    def patch(self, name: str, body: dict) -> None:
        self.sent.append((self.clock.monotonic() - 1000.0, name))
        if name in self.refuse:
            status, retry_after = self.refuse[name]
            raise KubeError(f"patch node {name}: HTTP {status}", status, retry_after)

    async def tick(self, advance_s: float = 0.0) -> int:
        self.clock.advance(advance_s)
        return await self.pub.publish_due(self.clock.wall(), self.clock.monotonic())

    def times(self, name: str) -> list[float]:
        return [t for t, n in self.sent if n == name]


def test_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    bucket = TokenBucket(rate=20.0, burst=20.0)
    bucket.refill(100.0)  # the first refill only starts the clock
    assert [bucket.take() for _ in range(21)] == [True] * 20 + [False]
    bucket.refill(100.25)  # 0.25 s at 20/s: 5 tokens
    assert [bucket.take() for _ in range(6)] == [True] * 5 + [False]
    bucket.refill(100.3125)  # 0.0625 s: 1.25 tokens, 0.25 left over
    assert [bucket.take() for _ in range(2)] == [True, False]
    bucket.refill(100.34375)  # 0.03125 s: 0.625 more, 0.875 in all
    assert bucket.tokens == 0.875
    assert not bucket.take()
    bucket.refill(100.375)  # 0.625 more: 1.5
    assert [bucket.take() for _ in range(2)] == [True, False]
    bucket.refill(200.0)  # 99.7 s would be 1,994 tokens: capped at the burst
    assert sum(bucket.take() for _ in range(30)) == 20
    bucket.refill(150.0)  # a clock going back adds nothing and takes nothing away
    assert bucket.tokens == 0
    bucket.refill(150.25)  # and counts on from where it is now
    assert bucket.tokens == 5


async def test_the_publisher_spends_exactly_the_refilled_budget() -> None:
    rig = Rig([f"n{i:02}" for i in range(40)], max_patches_per_s=8)
    assert await rig.tick() == 8  # a full bucket
    assert await rig.tick(0.5) == 4
    assert await rig.tick(0.3125) == 2  # 2.5 tokens: 0.5 left over
    assert await rig.tick(0.125) == 1  # 0.5 + 1.0 = 1.5
    assert await rig.tick(0.0625) == 1  # 0.5 + 0.5 = 1.0
    assert await rig.tick(0.0) == 0
    assert await rig.tick(10.0) == 8  # a long quiet spell saves up only the burst
    assert len(rig.sent) == 24


async def test_a_refused_node_backs_off_doubling_up_to_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(publisher, "NODE_BACKOFF_CAP_S", 8.0)
    rig = Rig(["ghost", "real"])
    rig.refuse["ghost"] = (404, None)
    await rig.tick()
    for _ in range(39):
        await rig.tick(1.0)
    # 1, 2, 4, 8, then every 8 s (the cap).
    assert rig.times("ghost") == [0, 1, 3, 7, 15, 23, 31, 39]
    # Accepted again: patched, and out of backoff for good (due again only on a change).
    del rig.refuse["ghost"]
    await rig.tick(8.0)  # 47 s: due
    assert rig.times("ghost")[-1] == 47
    assert "ghost" not in rig.pub._refused


@pytest.mark.parametrize("status", [403, 404, 409, 422])
async def test_a_real_node_is_annotated_while_many_failing_ones_exist(status: int) -> None:
    """60 nodes the API server refuses, listed before the real one, and 10 patches a
    second: without backoff they would take the whole budget every tick, forever."""
    ghosts = [f"ghost-{i:02}" for i in range(60)]
    rig = Rig([*ghosts, "real"], max_patches_per_s=10, heartbeat_s=1.0)
    for ghost in ghosts:
        rig.refuse[ghost] = (status, None)
    await rig.tick()
    for _ in range(29):
        await rig.tick(1.0)
    real = rig.times("real")
    # Every ghost is tried once first (6 ticks of 10), then the real node is reached, and
    # from then on it goes first: its heartbeat (1 s) is written every tick.
    assert real == [float(t) for t in range(6, 30)]
    # A ghost is retried 1, 3, 7 and 15 s after its first try at the earliest (31 s is past
    # the end): 5 tries at most each.
    tries = [len(rig.times(g)) for g in ghosts]
    assert min(tries) >= 1 and max(tries) == 5


async def test_server_trouble_pauses_every_patch_for_retry_after() -> None:
    rig = Rig(["a", "b", "c"])
    rig.refuse["a"] = (429, 3.0)
    assert await rig.tick() == 0  # "a" first: refused, and the tick stops
    assert rig.sent == [(0, "a")]
    for _ in range(2):
        assert await rig.tick(1.0) == 0  # paused at 1 s and 2 s
    assert rig.sent == [(0, "a")]
    del rig.refuse["a"]
    assert await rig.tick(1.0) == 3  # 3 s: all of them; "a" was not put in backoff
    assert "a" not in rig.pub._refused


async def test_server_errors_without_retry_after_pause_doubling() -> None:
    rig = Rig(["a"])
    rig.refuse["a"] = (500, None)
    await rig.tick()
    for _ in range(12):
        await rig.tick(1.0)
    assert rig.times("a") == [0, 1, 3, 7]  # paused 1, 2, 4 s; then 8 s runs past 12


async def test_no_patch_once_the_renew_deadline_passed(caplog: pytest.LogCaptureFixture) -> None:
    """The elector has not run since (a paused process): the leader flag is still set,
    and the fence alone keeps the write from going out."""
    rig = Rig(["a", "b"], deadline_s=1.5)
    rig.clock.advance(1.49)
    assert await rig.tick() == 2
    rig.cluster.upsert_node(node("c"))
    with caplog.at_level(logging.WARNING):
        assert await rig.tick(0.01) == 0  # 1.5 s after the renewal: not held any more
    assert rig.leader.is_set()
    assert [n for _, n in rig.sent] == ["a", "b"]
    assert "patch node c: not written: the lease is not held" in caplog.text
    rig.fence.renewed(rig.clock.monotonic())
    assert await rig.tick() == 1
