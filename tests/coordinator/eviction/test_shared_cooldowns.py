"""The cooldowns the leader shares with every replica (:mod:`coordinator.live.cooldowns`):
the executor, wired as the leader wires it, writes a round that really evicted to the
Lease in the coordinator's namespace on the API emulator; a dry run writes nothing; lapsed
entries are tidied; a leader taking over honours what the Lease says."""

from __future__ import annotations

import math

from coordinator.live import cooldowns
from coordinator.live.cooldowns import SharedCooldowns
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import NAMESPACES, PODS
from tests.coordinator.eviction.executorrig import COORDINATOR_NS, Rig, preemption, pressure


async def test_a_round_that_evicted_is_shared_until_its_cooldown_ends(kube: KubeApi) -> None:
    rig = Rig(kube, share=True, enabled=True, cooldown_s=300)
    try:
        victim = rig.pod("low")
        rig.clock.advance(0.5)  # the Lease says whole seconds: rounded up, never down
        started = rig.clock.wall()
        assert await rig.cycle(preemption([victim])) == ["evicted"]
        assert rig.shared() == {"team-a": math.ceil(started + 300)}
        assert rig.seen.active(rig.clock.wall()) == rig.shared()  # before the watch's echo
    finally:
        rig.close()


async def test_a_dry_run_round_starts_no_shared_cooldown(kube: KubeApi) -> None:
    """A dry run evicts nothing: the preview keeps its own cooldown (the next round for
    the queue reads as refused, as a real run would), but nothing is written for the
    other replicas, whose preempt verb must not hold kube-scheduler back for it."""
    rig = Rig(kube, share=True, cooldown_s=300)  # dry run: the default
    try:
        first, second = rig.pod("low"), rig.pod("other")
        assert await rig.cycle(preemption([first]), preemption([second])) == [
            "dry-run",
            "refused",
        ]
        assert rig.lease() is None
        assert rig.seen.entries() == {}
    finally:
        rig.close()


async def test_a_round_that_evicted_no_one_starts_no_shared_cooldown(kube: KubeApi) -> None:
    """A pressure round (no dry-run preflight) whose pod left meanwhile: nothing evicted."""
    rig = Rig(kube, share=True, enabled=True)
    try:
        gone = rig.pod("low")
        kube.store.delete(PODS, gone.namespace, gone.name)
        assert await rig.cycle(pressure([gone])) == ["error"]
        assert rig.lease() is None
    finally:
        rig.close()


async def test_lapsed_cooldowns_are_tidied_from_the_lease(kube: KubeApi) -> None:
    rig = Rig(kube, share=True, enabled=True, cooldown_s=300)
    try:
        assert await rig.cycle(preemption([rig.pod("low")])) == ["evicted"]
        rig.clock.advance(200)
        assert await rig.cycle(pressure([rig.pod("big", node="n2")], node="n2")) == ["evicted"]
        rig.clock.advance(101)  # team-a's cooldown is over, n2's is not
        await rig.executor.start_cycle()
        assert list(rig.shared()) == ["n2"]
        rig.clock.advance(200)
        await rig.executor.start_cycle()
        lease = rig.lease()
        assert lease is not None
        assert cooldowns.KEY not in (lease["metadata"].get("annotations") or {})
    finally:
        rig.close()


async def test_a_leader_taking_over_honours_the_shared_cooldowns(kube: KubeApi) -> None:
    """The new leader's executor remembers nothing of the old one's rounds; the Lease
    its watch delivers does: its planner's view and its own guard both refuse."""
    old = Rig(kube, share=True, enabled=True, cooldown_s=300)
    new = Rig(kube, share=True, enabled=True, cooldown_s=300)
    try:
        assert await old.cycle(preemption([old.pod("low")])) == ["evicted"]
        new.watched(new.seen)
        now = new.clock.wall()
        assert set(new.executor.cooling(new.clock.monotonic(), now)) == {"team-a"}
        assert await new.cycle(preemption([new.pod("other")])) == ["refused"]
        assert "team-a cooling down" in new.log.lines()[-1]
    finally:
        old.close()
        new.close()


async def test_a_write_that_failed_is_made_next_cycle(kube: KubeApi) -> None:
    rig = Rig(kube, share=True, enabled=True, cooldown_s=300)
    try:
        victim = rig.pod("low")
        kube.store.delete(NAMESPACES, "", COORDINATOR_NS)  # the Lease cannot be created
        assert await rig.cycle(preemption([victim])) == ["evicted"]
        assert rig.lease() is None
        kube.add_namespace(COORDINATOR_NS)
        await rig.executor.start_cycle()
        assert list(rig.shared()) == ["team-a"]
    finally:
        rig.close()


def test_an_entry_that_cannot_be_read_is_skipped_and_the_rest_kept() -> None:
    seen = SharedCooldowns()
    seen.observe('{"team-a": "2027-01-01T00:00:00Z", "team-b": "soon", "team-c": 7}')
    assert list(seen.entries()) == ["team-a"]
    entry = '"team-%d": "2027-01-01T00:00:00Z"'
    many = "{" + ", ".join(entry % k for k in range(cooldowns.MAX_VALUE_B // 30)) + "}"
    assert len(many) > cooldowns.MAX_VALUE_B
    for text in ("[1, 2]", "not json", many):
        seen.observe(text)
        assert seen.entries() == {}


def test_only_the_named_lease_counts() -> None:
    seen = SharedCooldowns()
    text = cooldowns.value({"team-a": 2e9}, 1e9)
    seen.upsert({"metadata": {"name": "stowage-coordinator", "annotations": {cooldowns.KEY: text}}})
    assert seen.entries() == {}
    seen.upsert({"metadata": {"name": cooldowns.LEASE, "annotations": {cooldowns.KEY: text}}})
    assert seen.entries() == {"team-a": 2e9}
    seen.remove({"metadata": {"name": cooldowns.LEASE}})
    assert seen.entries() == {}


def test_the_value_keeps_the_cooldowns_ending_last_within_its_bound() -> None:
    now = 1e9
    until = {f"q{k}": now + 1 + k for k in range(cooldowns.MAX_ENTRIES + 10)}
    until["lapsed"] = now
    text = cooldowns.value(until, now)
    assert text is not None and len(text) <= cooldowns.MAX_VALUE_B
    kept = cooldowns.parse(text)
    assert len(kept) == cooldowns.MAX_ENTRIES
    assert "q9" not in kept and "q10" in kept and "lapsed" not in kept
    longest = {"q" * 253 + str(k): now + 1 for k in range(cooldowns.MAX_ENTRIES)}
    assert len(cooldowns.value(longest, now) or "") <= cooldowns.MAX_VALUE_B
