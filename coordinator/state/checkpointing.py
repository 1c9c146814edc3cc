"""How long a pod's ``stowage.io/checkpointing: "true"`` claim keeps it from being a victim.

A pod writing a checkpoint should not be evicted halfway through. But the pod's owner
writes the annotation, so the claim alone must not make a pod unevictable for good: it
shields the pod for ``evictions.checkpointing_max_s`` from the later of

* when this coordinator first saw a claim on the pod, and
* when it last saw the pod's last checkpoint (``stowage.io/last-checkpoint`` or
  ``volcano.sh/last-checkpoint-time``) move past every value it had seen before.

A job that checkpoints keeps its shield by recording each checkpoint it finishes; a claim
whose last checkpoint stands still for ``checkpointing_max_s`` no longer shields. Taking
the claim off and putting it back starts nothing afresh: the first claim is remembered
for as long as the pod (its uid) exists. Times are on the coordinator's monotonic clock,
by when it saw each change, never by the times the pod writes. A coordinator that
starts (or becomes leader) without this history sees every claim as new: a claim gains
at most one more ``checkpointing_max_s`` from it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from coordinator.state.podfacts import PodFacts


@dataclass(slots=True)
class _Claim:
    since: float
    """When the shield's time started (monotonic): the first claim or the last move."""
    checkpoint_at: float | None
    """The latest last checkpoint seen (as the pod wrote it), for telling a move."""


class CheckpointingClaims:
    """The claims of the pods that ever made one, by uid, across their updates."""

    def __init__(self, max_s: float) -> None:
        self._max_s = max_s
        self._claims: dict[str, _Claim] = {}

    def observe(self, facts: PodFacts, now: float) -> None:
        """A pod's facts as the watch delivered them at ``now`` (monotonic)."""
        claim = self._claims.get(facts.uid)
        if claim is None:
            if facts.checkpointing:
                self._claims[facts.uid] = _Claim(now, facts.checkpoint_at)
            return
        latest = facts.checkpoint_at
        if latest is not None and (claim.checkpoint_at is None or latest > claim.checkpoint_at):
            claim.since, claim.checkpoint_at = now, latest

    def forget(self, uid: str) -> None:
        """The pod is gone (deleted, finished)."""
        self._claims.pop(uid, None)

    def retain(self, uids: Collection[str]) -> None:
        """After a relist: only pods still listed keep their history."""
        self._claims = {u: c for u, c in self._claims.items() if u in uids}

    def shielded(self, facts: Mapping[str, PodFacts], now: float) -> frozenset[str]:
        """The uids whose claim shields them at ``now`` (monotonic): claiming now, and
        less than ``max_s`` since the first claim or the last checkpoint move."""
        return frozenset(
            uid
            for uid, claim in self._claims.items()
            if now - claim.since < self._max_s
            and (f := facts.get(uid)) is not None
            and f.checkpointing
        )
