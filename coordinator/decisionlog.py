"""The eviction executor's decisions, kept for ``/debug/evictions``: the latest few
hundred, one line each, so an operator can read why each plan was (or was not) acted on —
on every replica the same format; a follower has only the preempt verb's refusals
(:mod:`coordinator.extender.refusals`). It sits at the bottom of
the coordinator (a bounded list of lines, no logic) so the shared services can hold it
without reaching up into the eviction package."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from common import annotations as ann

MAX_DECISIONS = 256


@dataclass(frozen=True, slots=True)
class Decision:
    at: float
    """Wall-clock time (shown only)."""
    trigger: str
    subject: str
    """The preemptor (``ns/name``) or, for pressure, the node."""
    decision: str
    """evicted, dry-run, partial, awaiting-approval, expired, refused, not-leader, error."""
    reason: str
    victims: tuple[tuple[str, str], ...] = ()
    """``(ns/name, outcome)`` of each victim acted on."""

    def line(self) -> str:
        victims = " ".join(f"{pod}={outcome}" for pod, outcome in self.victims)
        text = (
            f"{ann.timestamp(self.at)} {self.trigger} {self.subject} {self.decision}: {self.reason}"
        )
        return f"{text} [{victims}]" if victims else text


class DecisionLog:
    def __init__(self, size: int = MAX_DECISIONS) -> None:
        self._items: deque[Decision] = deque(maxlen=size)

    def add(self, decision: Decision) -> None:
        self._items.append(decision)

    def lines(self) -> list[str]:
        """Oldest first."""
        return [d.line() for d in self._items]

    def __iter__(self) -> Iterator[Decision]:
        return iter(tuple(self._items))
