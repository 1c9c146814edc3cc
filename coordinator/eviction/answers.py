"""What the eviction planner answers: a :class:`Plan` (the node, the victims and why) or a
:class:`Refusal` (why nothing may be evicted), the priority :data:`Level` each pod is
judged by (:func:`level_of`) and the queue whose rules a round follows (:func:`queue_of`).

Neither may favour a pod on its owner's word, since its owner writes its labels and
annotations: the level comes from ``spec.priority`` (its PriorityClass) and a label may
only lower it; the queue comes from the pod's Volcano PodGroup, else its namespace.

Both are frozen values: the executor acts on a plan, publishes it (an Event, an
annotation awaiting approval) and shows it in ``/debug``, so a plan must not change after
it is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from coordinator.config import EvictionSettings
from coordinator.eviction.view import ClusterView
from coordinator.state.podfacts import PodFacts


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
    """Its queue (:func:`queue_of`): its PodGroup's, else its namespace."""
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
    """``"preemption"``, ``"pressure"`` or ``"consolidation"`` (a drain,
    :mod:`coordinator.consolidation.drain`)."""
    node: str
    victims: tuple[Victim, ...]
    """The whole set, gang members dragged along included."""
    preemptor: str | None
    """``ns/name`` of the pending pod (preemption); None for pressure."""
    queue: str
    """The queue whose cooldown this round spends: the preemptor's (:func:`queue_of`); for
    pressure, the node."""
    reason: str
    """Human-readable why (the Event message, the ``/debug`` line)."""
    needs_approval: bool
    """The queue's weight is above the configured threshold: a person approves first."""
    cost: tuple[float, ...]
    """The key minimised: (victims, sum of their levels, work lost since their last
    checkpoints in seconds, gang members dragged along)."""
    cut: bool = False
    """The deadline stopped the search before it was done: the cheapest plan found by
    then, which a longer search might have beaten."""
    preemptor_uid: str | None = None
    """The pending pod's uid (preemption): its nomination names it."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """No plan, and why (e.g. "no node: the preemptor would still not fit after evicting
    every allowed pod")."""

    reason: str


class Deadline:
    """Until when a search may go on, on an injected monotonic clock."""

    def __init__(self, clock: Callable[[], float], until: float) -> None:
        self._clock = clock
        self.until = until

    def passed(self) -> bool:
        return self._clock() >= self.until


NO_DEADLINE: Final = Deadline(lambda: 0.0, float("inf"))


# ------------------------------------------------------------------------ levels

_NAMED: Final = {level.name.lower(): level for level in Level}


def level_of(pod: PodFacts, settings: EvictionSettings) -> Level:
    """The highest level whose least priority the pod's ``spec.priority`` reaches (else
    low), or the lower level the configured label names. The label is its owner's word:
    it may give standing up, never gain it."""
    level = next(
        (
            candidate
            for candidate in (Level.CRITICAL, Level.HIGH, Level.MEDIUM)
            if (floor := settings.level_min_priority.get(candidate.name.lower())) is not None
            and pod.priority >= floor
        ),
        Level.LOW,
    )
    named = _NAMED.get(pod.level_mark or "")
    return level if named is None else min(level, named)


# ------------------------------------------------------------------------ queues


def queue_of(view: ClusterView, pod: PodFacts, settings: EvictionSettings, now: float) -> str:
    """The queue whose cooldown and approval rule a round for ``pod`` follows: its
    PodGroup's ``spec.queue``, or its namespace when it is in no PodGroup
    (:mod:`coordinator.state.podgroups`).

    While the PodGroup the pod names is not known, the cautious choice: the strictest of
    the queues it could be in as far as is known (its namespace and the queues of its
    namespace's known PodGroups). Cooling down is strictest, the longest first: it allows
    no round at all; then the heaviest weight: a plan for it waits for approval wherever
    any of them would; ties by name. A pod naming a PodGroup that does not exist is so
    judged at least as strictly as the PodGroups of its namespace that do."""
    known = view.queues.of(pod)
    if known is not None:
        return known

    def strictness(queue: str) -> tuple[float, int]:
        cooling_s = max(0.0, view.cooldown_until.get(queue, now) - now)
        return (cooling_s, settings.queue_weights.get(queue, 0))

    return max(view.queues.candidates(pod.namespace), key=strictness)
