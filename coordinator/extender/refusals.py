"""Why the preempt verb let no victim through for a pod, told where the eviction
executor tells its decisions: a line in the decision log (``/debug/evictions``, on the
replica kube-scheduler asked) and ``stowage_eviction_plans{trigger="preempt-verb",
decision="refused"}``.

kube-scheduler asks again at every scheduling attempt of the pod (every few seconds while
it backs off), so the metric counts every refusal but the log takes a line only when the
reason changes, or when ``evictions.cooldown_s`` has passed since it last took one: one
line per reason per cooldown, as the executor's Events. The Event on the pod comes from
the leader's eviction cycle, which plans for the same pending pod and tells the same
refusal once (``EvictionNotPlanned``): a replica answering the verb may not be the
leader, and only the leader writes Events.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from coordinator.decisionlog import Decision
from coordinator.services import Services

TRIGGER: Final = "preempt-verb"
MAX_REMEMBERED: Final = 4096
"""Pods whose last refusal is remembered; the oldest is forgotten first (the verb's
callers are not authenticated, so made-up pods must not grow it without bound)."""


class VerbRefusals:
    def __init__(self) -> None:
        self._told: OrderedDict[str, tuple[str, float]] = OrderedDict()
        """Pod → the reason last logged, and when (monotonic seconds)."""

    def refused(self, services: Services, pod: str, reason: str) -> None:
        """The verb refused every node for ``pod`` (``ns/name``) because of ``reason``."""
        services.metrics.eviction_plans.labels(TRIGGER, "refused").inc()
        now = services.clock.monotonic()
        last = self._told.get(pod)
        every_s = services.settings.evictions.cooldown_s
        if last is not None and last[0] == reason and now < last[1] + every_s:
            return
        self._told[pod] = (reason, now)
        self._told.move_to_end(pod)
        while len(self._told) > MAX_REMEMBERED:
            self._told.popitem(last=False)
        services.evictions.add(Decision(services.clock.wall(), TRIGGER, pod, "refused", reason))
