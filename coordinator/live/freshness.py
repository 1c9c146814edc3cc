"""Whether a node's report is recent enough to act on: the one judge of freshness.

A node's report holds for ``signals.report_ttl_s`` after its request was *received*, on
the coordinator's own monotonic clock — whatever the agent wrote in ``measured_at`` (an
agent's clock may be wrong, step back, or lie). Of two reports of a node, the one whose
request arrived later wins. :class:`Receipts` keeps when each node's latest report came
and answers, per node, a :class:`Verdict`: fresh, stale or unknown, and why.

Everything that acts on a report asks here rather than reading the TTL or comparing a
receipt with the clock itself: the live cluster's expiry (which drops a stale node's
signals and releases its colocation throttle), the eviction pressure trigger (which
refuses a stale report even before the expiry has run), the node view and the
explanations. A test over ``coordinator/`` fails if another module reads the TTL or a
receipt (``tests/coordinator/unit/test_freshness.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from common.clock import Clock
from coordinator.config import SignalSettings

EXPIRY_CHECKS_PER_TTL: Final = 4
"""The expiry runs at least this often within one TTL, so a node goes unknown at most a
quarter of the TTL late."""

EXPIRY_PERIOD_MAX_S: Final = 5.0
"""…and at least every 5 s, however long the TTL."""


class Freshness(enum.Enum):
    """What a node's latest report is worth now."""

    FRESH = "fresh"
    """Received within the TTL: its signals count."""
    STALE = "stale"
    """Received longer ago than the TTL: unknown (neutral), never acted on."""
    UNKNOWN = "unknown"
    """No report received since this replica started (or since the node joined)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One node's freshness now, why, and what it went by."""

    freshness: Freshness
    reason: str
    received_at: float | None
    """When its latest report's request arrived (monotonic); None before any."""
    measured_at: float | None
    """``measured_at`` of that report as its agent wrote it: shown, never judged by."""
    age_s: float | None
    """Seconds since ``received_at`` (never negative); None before any report."""

    @property
    def fresh(self) -> bool:
        return self.freshness is Freshness.FRESH


class Receipts:
    """When each node's latest applied report was received, and the verdicts over them.

    Holds the nodes it is told of only: the live cluster forgets a node that leaves."""

    def __init__(self, settings: SignalSettings, clock: Clock) -> None:
        self._ttl_s = settings.report_ttl_s
        self._clock = clock
        self._received: dict[str, float] = {}
        self._measured: dict[str, float] = {}

    @property
    def expiry_period_s(self) -> float:
        """How often the expiry should run (see :data:`EXPIRY_CHECKS_PER_TTL`)."""
        return min(EXPIRY_PERIOD_MAX_S, self._ttl_s / EXPIRY_CHECKS_PER_TTL)

    @property
    def received_at(self) -> Mapping[str, float]:
        """Node → when its latest applied report was received (a read-only view)."""
        return MappingProxyType(self._received)

    @property
    def measured_at(self) -> Mapping[str, float]:
        """Node → that report's ``measured_at`` (a read-only view; the same nodes)."""
        return MappingProxyType(self._measured)

    def receive(self, node: str, received_at: float, measured_at: float) -> bool:
        """Note a report of ``node`` whose request arrived at ``received_at``; False (and
        nothing noted) where the report already noted arrived later: this one was
        overtaken (a retry that took longer)."""
        last = self._received.get(node)
        if last is not None and received_at < last:
            return False
        self._received[node] = received_at
        self._measured[node] = measured_at
        return True

    def since_previous_s(self, node: str, received_at: float) -> float | None:
        """Seconds from the node's latest report to one arriving at ``received_at``, at
        most the TTL (no report counts for longer than it stays fresh); None before any."""
        last = self._received.get(node)
        if last is None:
            return None
        return max(0.0, min(received_at - last, self._ttl_s))

    def age_s(self, node: str, now: float) -> float | None:
        """Seconds since the node's latest report was received (never negative); None
        before any. Cheaper than :meth:`verdict` where only the age is shown."""
        received = self._received.get(node)
        return None if received is None else max(0.0, now - received)

    def verdict(self, node: str, now: float | None = None) -> Verdict:
        """The node's freshness at ``now`` (the clock's monotonic time by default)."""
        if now is None:
            now = self._clock.monotonic()
        received = self._received.get(node)
        if received is None:
            return Verdict(Freshness.UNKNOWN, "no report received yet", None, None, None)
        age, measured, ttl = max(0.0, now - received), self._measured[node], self._ttl_s
        if self._stale(received, now):
            why = f"no report for {age:.1f}s (signals.report_ttl_s {ttl:g}s)"
            return Verdict(Freshness.STALE, why, received, measured, age)
        why = f"report received {age:.1f}s ago (within {ttl:g}s)"
        return Verdict(Freshness.FRESH, why, received, measured, age)

    def stale_among(self, nodes: Iterable[str], now: float) -> list[str]:
        """Those of ``nodes`` (in their order) without a fresh report at ``now``."""
        received = self._received
        return [n for n in nodes if n not in received or self._stale(received[n], now)]

    def forget(self, node: str) -> None:
        """The node left the cluster: its receipts go."""
        self._received.pop(node, None)
        self._measured.pop(node, None)

    def _stale(self, received_at: float, now: float) -> bool:
        """The one comparison of a receipt with the TTL: exactly the TTL old is fresh."""
        return now - received_at > self._ttl_s
