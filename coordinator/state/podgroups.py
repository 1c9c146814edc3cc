"""The queues of Volcano PodGroups (``scheduling.volcano.sh/v1beta1``), fed by their watch.

A pod's queue decides whether a preemption plan for it waits for a person's approval and
which cooldown its round spends, so it must not be the pod's own word: a pod annotated
with a made-up queue would have neither. It is the ``spec.queue`` of the PodGroup the
pod's ``scheduling.k8s.io/group-name`` annotation names, in the pod's own namespace.
PodGroups are written by Volcano's controllers and job owners, and Volcano's admission
checks ``spec.queue`` against the existing Queues: which queues a job may use is
Volcano's to govern. An empty ``spec.queue`` is Volcano's ``default`` queue. A pod in no
PodGroup is in its namespace's queue.

While the PodGroup a pod names is not known (the watch has not delivered it yet, or there
is no such PodGroup) the pod's queue is not known either, and the planner takes the
strictest it could be in (:func:`coordinator.eviction.answers.queue_of`) among
:meth:`Queues.candidates`. Where the API server does not serve PodGroups (Volcano is not
installed: the list answers 404) there are none, and every pod's queue is its namespace.

A PodGroup's ``spec.minMember`` is how many members its gang has for gang locality
(:mod:`coordinator.scoring.ganglocality`); one that is not a count in 1 … 2^31-1 (an
int32, as the CRD has it) is not known, and the pod's own count is used.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from coordinator.state.kubeobjects import MAX_GANG_SIZE
from coordinator.state.podfacts import PodFacts

log = logging.getLogger(__name__)

DEFAULT_QUEUE: Final = "default"
"""Volcano's queue for a PodGroup whose ``spec.queue`` is empty."""


@dataclass(frozen=True, slots=True)
class Queues:
    """The PodGroups' queues at one moment, as a planner's view holds them."""

    by_group: Mapping[str, str]
    """PodGroup ``namespace/name`` → its queue."""

    def of(self, pod: PodFacts) -> str | None:
        """The pod's queue: its PodGroup's, or its namespace when it names none; None
        while the PodGroup it names is not known."""
        if pod.gang is None:
            return pod.namespace
        return self.by_group.get(pod.gang)

    def candidates(self, namespace: str) -> list[str]:
        """The queues, as far as is known, that a pod of ``namespace`` whose PodGroup is
        not known could be in: the namespace and the queues of its known PodGroups
        (sorted). A scan of every PodGroup: asked only for such pods, rarely."""
        prefix = f"{namespace}/"
        found = {q for g, q in self.by_group.items() if g.startswith(prefix)}
        return sorted({namespace, *found})


class PodGroups:
    """The cluster's PodGroups, by ``namespace/name``, as their watch delivers them."""

    def __init__(self) -> None:
        self._by_group: dict[str, str] = {}
        self._min_member: dict[str, int] = {}

    def replace(self, podgroups: Iterable[Mapping[str, Any]]) -> None:
        """A full list (empty where PodGroups are not served)."""
        self._by_group = {}
        self._min_member = {}
        for podgroup in podgroups:
            self.upsert(podgroup)

    def upsert(self, podgroup: Mapping[str, Any]) -> None:
        """One PodGroup; one whose queue cannot be read counts as not known (its pods
        get the cautious queue), with a warning."""
        key = _key(podgroup)
        if key is None:
            return
        spec = podgroup.get("spec") or {}
        least = spec.get("minMember")
        if isinstance(least, int) and not isinstance(least, bool) and 1 <= least <= MAX_GANG_SIZE:
            self._min_member[key] = least
        else:
            self._min_member.pop(key, None)
        queue = spec.get("queue") or DEFAULT_QUEUE
        if not isinstance(queue, str):
            log.warning(
                "podgroup %s: spec.queue %r is not a name; its queue is unknown", key, queue
            )
            self._by_group.pop(key, None)
            return
        self._by_group[key] = queue

    def remove(self, podgroup: Mapping[str, Any]) -> None:
        key = _key(podgroup)
        if key is not None:
            self._by_group.pop(key, None)
            self._min_member.pop(key, None)

    def min_member(self, group: str) -> int | None:
        """``spec.minMember`` of the PodGroup ``namespace/name``, None where not known."""
        return self._min_member.get(group)

    def queues(self) -> Queues:
        """A copy for a planner's view: later watch events do not change it."""
        return Queues(dict(self._by_group))


def _key(podgroup: Mapping[str, Any]) -> str | None:
    meta = podgroup.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
        return None
    return f"{namespace}/{name}"
