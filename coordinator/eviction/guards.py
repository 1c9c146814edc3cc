"""What the executor remembers between cycles, and counts within one: the cooldown per
queue, the owners whose pods were evicted lately (loop prevention), and the caps of the
current cycle. All on the coordinator's monotonic clock, passed in by the caller."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from coordinator.config import EvictionSettings
from coordinator.eviction.answers import Victim


class Cooldowns:
    """One round per key (a queue; a node for pressure) per ``cooldown_s``."""

    def __init__(self, cooldown_s: float) -> None:
        self._cooldown_s = cooldown_s
        self._until: dict[str, float] = {}

    def remaining_s(self, key: str, now_mono: float) -> float:
        """Seconds until ``key`` may have another round; 0 when it may now."""
        return max(0.0, self._until.get(key, now_mono) - now_mono)

    def until(self, now_mono: float, now_wall: float) -> dict[str, float]:
        """Key → until when (Unix seconds) it cools down, for the planner's view."""
        return {k: now_wall + (t - now_mono) for k, t in self._until.items() if t > now_mono}

    def spend(self, key: str, now_mono: float) -> None:
        self._until[key] = now_mono + self._cooldown_s

    def forget_lapsed(self, now_mono: float) -> None:
        for key in [k for k, until in self._until.items() if until <= now_mono]:
            del self._until[key]


class Replacements:
    """Loop prevention: the owners (controllers) of pods evicted for a trigger, each for
    ``cooldown_s``. A pod of the same owner — the replacement its controller created, on
    whatever node it landed — is not evicted again for the same trigger until then: the
    descheduler's loop (evict, recreate, land on the same node, evict …) cannot start."""

    def __init__(self, cooldown_s: float) -> None:
        self._cooldown_s = cooldown_s
        self._until: dict[tuple[str, str], float] = {}

    def evicted(self, owner: str, trigger: str, now_mono: float) -> None:
        self._until[(owner, trigger)] = now_mono + self._cooldown_s

    def spared_s(self, owner: str, trigger: str, now_mono: float) -> float:
        """Seconds a pod of ``owner`` is still spared from ``trigger``; 0 when it is not."""
        return max(0.0, self._until.get((owner, trigger), now_mono) - now_mono)

    def forget_lapsed(self, now_mono: float) -> None:
        for key in [k for k, until in self._until.items() if until <= now_mono]:
            del self._until[key]


@dataclass
class CycleCaps:
    """Evictions sent in the current cycle, against the caps per cycle: cluster-wide, per
    node and per namespace."""

    settings: EvictionSettings
    total: int = 0
    by_node: Counter[str] = field(default_factory=Counter)
    by_namespace: Counter[str] = field(default_factory=Counter)

    def fitting(self, victims: Sequence[Victim]) -> int:
        """How many of ``victims``, in order, fit within what the caps leave."""
        s = self.settings
        nodes: Counter[str] = Counter()
        namespaces: Counter[str] = Counter()
        for n, victim in enumerate(victims):
            nodes[victim.node] += 1
            namespaces[victim.namespace] += 1
            if (
                self.total + n + 1 > s.max_per_cycle
                or self.by_node[victim.node] + nodes[victim.node] > s.max_per_node_per_cycle
                or self.by_namespace[victim.namespace] + namespaces[victim.namespace]
                > s.max_per_namespace_per_cycle
            ):
                return n
        return len(victims)

    def count(self, victim: Victim) -> None:
        self.total += 1
        self.by_node[victim.node] += 1
        self.by_namespace[victim.namespace] += 1
