"""What each queue may hold and holds now, fed by the watches of Volcano ``Queue`` objects
and of ResourceQuotas.

* A **Volcano Queue** (``scheduling.volcano.sh/v1beta1``, cluster-scoped, written by
  operators) bounds its queue by ``spec.capability`` (a resource Volcano leaves out is not
  bounded) and says what it holds in ``status.allocated`` (Volcano 1.9 and later); where
  the status does not say, what the queue's bound pods request is counted instead.
* A namespace without a Volcano Queue of its name is its own queue
  (:mod:`coordinator.state.podgroups`), bounded by its **ResourceQuotas** (written by
  whoever administers the namespace's quota, the quota controller writing ``status``):
  ``requests.<resource>`` (and the bare ``cpu``, ``memory``, ``ephemeral-storage``, which
  mean the same) of ``status.hard`` against ``status.used``. Of several quotas the one
  with the least room left bounds each resource. ``limits.*``, object counts and
  ``pods`` do not say how much room pods need, and are left out.

A queue with neither is unbounded and gets no hint (:mod:`coordinator.autoscale.hints`):
there is nothing to measure its gap against. An object whose amounts cannot be read is
dropped, with a warning, so one bad Queue never stops the watch or another queue's hint.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from coordinator import feasibility
from coordinator.feasibility.objects import amounts

log = logging.getLogger(__name__)

VOLCANO: Final = "volcano-queue"
QUOTA: Final = "resourcequota"
BARE: Final = frozenset({"cpu", "memory", "ephemeral-storage"})
"""Quota keys that mean ``requests.<key>``."""


@dataclass(frozen=True, slots=True)
class Bound:
    """One queue's bound: what it may hold, and what it holds (None: count its pods)."""

    queue: str
    source: str
    """:data:`VOLCANO` or :data:`QUOTA`: how the hint is told (on the Queue, or by an Event
    about the Namespace)."""
    capability: Mapping[str, int]
    """Resource → the most the queue may hold, in the model's units (cpu in milli-cores);
    a resource absent is not bounded."""
    allocated: Mapping[str, int] | None


class Capacities:
    """The Volcano Queues and ResourceQuotas, as their watches deliver them."""

    def __init__(self) -> None:
        self._queues: dict[str, Bound] = {}
        self._quotas: dict[str, dict[str, tuple[dict[str, int], dict[str, int]]]] = {}
        """Namespace → quota name → (hard, used)."""

    # --------------------------------------------------------- Volcano Queues

    def replace_queues(self, queues: Iterable[Mapping[str, Any]]) -> None:
        self._queues = {}
        for queue in queues:
            self.upsert_queue(queue)

    def upsert_queue(self, queue: Mapping[str, Any]) -> None:
        name = _name(queue)
        if name is None:
            return
        status = queue.get("status") or {}
        try:
            capability = amounts((queue.get("spec") or {}).get("capability") or {})
            held = status.get("allocated")
            allocated = None if held is None else amounts(held)
        except feasibility.Malformed as e:
            log.warning("ignoring queue %s: %s", name, e)
            self._queues.pop(name, None)
            return
        self._queues[name] = Bound(name, VOLCANO, capability, allocated)

    def remove_queue(self, queue: Mapping[str, Any]) -> None:
        name = _name(queue)
        if name is not None:
            self._queues.pop(name, None)

    # --------------------------------------------------------- ResourceQuotas

    def replace_quotas(self, quotas: Iterable[Mapping[str, Any]]) -> None:
        self._quotas = {}
        for quota in quotas:
            self.upsert_quota(quota)

    def upsert_quota(self, quota: Mapping[str, Any]) -> None:
        meta = quota.get("metadata") or {}
        namespace, name = meta.get("namespace"), meta.get("name")
        if not isinstance(namespace, str) or not isinstance(name, str):
            return
        status = quota.get("status") or {}
        try:
            hard = _requests(status.get("hard") or (quota.get("spec") or {}).get("hard") or {})
            used = _requests(status.get("used") or {})
        except feasibility.Malformed as e:
            log.warning("ignoring resourcequota %s/%s: %s", namespace, name, e)
            self._drop_quota(namespace, name)
            return
        self._quotas.setdefault(namespace, {})[name] = (hard, used)

    def remove_quota(self, quota: Mapping[str, Any]) -> None:
        meta = quota.get("metadata") or {}
        self._drop_quota(str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    def _drop_quota(self, namespace: str, name: str) -> None:
        found = self._quotas.get(namespace)
        if found is not None:
            found.pop(name, None)
            if not found:
                del self._quotas[namespace]

    # --------------------------------------------------------- reading

    def bounds(self) -> dict[str, Bound]:
        """Queue → its bound: every Volcano Queue, then every namespace with a quota
        that no Volcano Queue of the same name takes (a copy: later events do not
        change it)."""
        found = dict(self._queues)
        for namespace, quotas in self._quotas.items():
            if namespace in found or not quotas:
                continue
            capability: dict[str, int] = {}
            allocated: dict[str, int] = {}
            for hard, used in quotas.values():
                for resource, most in hard.items():
                    room = most - used.get(resource, 0)
                    if (
                        resource not in capability
                        or room < capability[resource] - allocated[resource]
                    ):
                        capability[resource] = most
                        allocated[resource] = used.get(resource, 0)
            found[namespace] = Bound(namespace, QUOTA, capability, allocated)
        return found


def _requests(raw: Mapping[str, Any]) -> dict[str, int]:
    """The request amounts of a quota's ``hard`` or ``used``, by resource name."""
    if not isinstance(raw, Mapping):
        raise feasibility.Malformed("hard/used is not a resource list")
    picked: dict[str, Any] = {}
    for key, value in raw.items():
        key = str(key)
        if key.startswith("requests."):
            picked[key.removeprefix("requests.")] = value
        elif key in BARE:
            picked.setdefault(key, value)
    found = amounts(picked)
    return {k: found.get(k, 0) for k in picked}


def _name(obj: Mapping[str, Any]) -> str | None:
    name = (obj.get("metadata") or {}).get("name")
    return name if isinstance(name, str) and name else None
