"""What the eviction planner answers: a :class:`Plan` (the node, the victims and why) or a
:class:`Refusal` (why nothing may be evicted), and the priority :data:`Level` each pod
is judged by.

Both are frozen values: the executor acts on a plan, publishes it (an Event, an
annotation awaiting approval) and shows it in ``/debug``, so a plan must not change after
it is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Level(IntEnum):
    """A pod's priority level, Critical > High > Medium > Low: a pod may displace only
    pods at least two levels below its own (the two-level rule)."""

    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4


@dataclass(frozen=True, slots=True)
class Victim:
    """A pod a plan would evict."""

    uid: str
    namespace: str
    name: str
    node: str
    level: Level
    priority: int
    queue: str
    """Its Volcano queue (label or annotation), else its namespace."""
    checkpoint_age_s: float | None
    """Seconds since ``stowage.io/last-checkpoint`` or ``volcano.sh/last-checkpoint-time``;
    None when unknown (all its work since it started is at stake)."""
    gang: str | None
    """Its Volcano PodGroup (``ns/name``), if any."""
    reason: str
    """Why this pod is in the plan."""


@dataclass(frozen=True, slots=True)
class Plan:
    """One round of evictions on one node."""

    trigger: str
    """``"preemption"`` or ``"pressure"``."""
    node: str
    victims: tuple[Victim, ...]
    """The whole set, gang members dragged along included."""
    preemptor: str | None
    """``ns/name`` of the pending pod (preemption); None for pressure."""
    queue: str
    """The queue whose cooldown this round spends: the preemptor's; for pressure, the node."""
    reason: str
    """Human-readable why (the Event message, the ``/debug`` line)."""
    needs_approval: bool
    """The queue's weight is above the configured threshold: a person approves first."""
    cost: tuple[float, ...]
    """The key minimised: (victims, sum of their levels, work lost since their last
    checkpoints in seconds, gang members dragged along)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """No plan, and why (e.g. "no node: the preemptor would still not fit after evicting
    every allowed pod")."""

    reason: str
