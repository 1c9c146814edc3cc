"""The queue cooldowns every replica honours: one Lease in the coordinator's own namespace
says which queues (a node, for pressure) had a round that really evicted, and until when
no other round may follow.

The leader's executor keeps its cooldowns in memory (:mod:`coordinator.eviction.guards`),
but kube-scheduler may ask any replica's ``/scheduler/preempt``, and a preemption it
carries out through that verb evicts as surely as one of Stowage's rounds. So each round
that evicted is also written down, in the annotation :data:`KEY` of the Lease
:data:`LEASE` in ``kube.namespace``::

    stowage.io/cooldowns: {"team-a": "2026-12-07T13:05:00Z", "gpu-7": "2026-12-07T13:06:10Z"}

(a JSON object, since a queue name is a PodGroup's ``spec.queue``, any string) — and every
replica reads it from its watch of that Lease, so the verb refuses what the planner would
refuse, and a leader taking over carries on the cooldowns of the one before.

* **Only rounds that evicted.** A dry-run round evicts nothing: the leader's own preview
  still counts it (so ``/debug/evictions`` reads as a real run would), but it is not
  written here, and kube-scheduler's preemption is never held back by a round that only
  pretended.
* **Tidied.** The leader drops the entries that lapsed at the start of each cycle; a
  replica reading an entry that lapsed ignores it anyway (on its own wall clock: replicas
  whose clocks disagree disagree by as much on when a cooldown ends).
* **Trusted as an operator's object.** Writes in the coordinator's namespace are granted
  by the cluster's operators; no pod's owner can write it. An entry that cannot be read
  is skipped with a warning; a value larger than :data:`MAX_VALUE_B` is ignored whole.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from common import annotations as ann

log = logging.getLogger(__name__)

APPLIED_NOTE: Final = (
    "the cooldowns of rounds that evicted are applied; a dry-run round's, kept by the"
    " leader's executor alone, are not"
)
"""What a read-only preview (``/debug/plan``, ``/debug/drains``, ``/debug/defrag``) says of
the cooldowns it planned under: the shared ones, every replica's."""

LEASE: Final = "stowage-cooldowns"
KEY: Final = ann.PREFIX + "cooldowns"
MAX_ENTRIES: Final = 512
"""Most cooldowns written at once; past it the ones ending first are left out (with a
warning). A round takes at least one eviction and the caps allow ``max_per_cycle`` a
cycle, so only a cooldown far longer than the defaults' 300 s could reach it."""
MAX_VALUE_B: Final = 160 * 1024
"""What :data:`MAX_ENTRIES` entries of the longest names (253 characters) take, with the
rest of the Lease well within the API server's 256 kB for annotations."""


class SharedCooldowns:
    """The cooldowns of the Lease :data:`LEASE`, as this replica's watch has it."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def replace(self, leases: Iterable[Mapping[str, Any]]) -> None:
        """A full list (the watch's field selector leaves only :data:`LEASE`)."""
        self._until = {}
        for lease in leases:
            self.upsert(lease)

    def upsert(self, lease: Mapping[str, Any]) -> None:
        meta = lease.get("metadata") or {}
        if meta.get("name") == LEASE:
            self.observe((meta.get("annotations") or {}).get(KEY))

    def remove(self, lease: Mapping[str, Any]) -> None:
        if (lease.get("metadata") or {}).get("name") == LEASE:
            self._until = {}

    def observe(self, text: str | None) -> None:
        """The annotation's value as the watch has it (or as the leader just wrote it)."""
        self._until = parse(text) if text else {}

    def entries(self) -> dict[str, float]:
        """Every entry, lapsed or not: key → until when (Unix seconds)."""
        return dict(self._until)

    def active(self, now: float) -> dict[str, float]:
        """The keys cooling down at ``now`` (Unix seconds) → until when."""
        return {key: until for key, until in self._until.items() if until > now}


def ends(now: float, cooldown_s: float) -> float:
    """When a cooldown that starts at ``now`` ends, rounded up to the whole second the
    annotation can say: a cooldown read back is never shorter than the one spent."""
    return float(math.ceil(now + cooldown_s))


def value(until: Mapping[str, float], now: float) -> str | None:
    """The annotation's value for the entries of ``until`` not lapsed at ``now`` (None:
    remove it), the :data:`MAX_ENTRIES` ending last."""
    kept = sorted(((t, k) for k, t in until.items() if t > now), reverse=True)
    if len(kept) > MAX_ENTRIES:
        log.warning("%d queues cooling down: only the %d ending last are shared", len(kept),
                    MAX_ENTRIES)  # fmt: skip
        kept = kept[:MAX_ENTRIES]
    if not kept:
        return None
    return json.dumps({k: ann.timestamp(t) for t, k in sorted(kept, key=lambda e: e[1])})


def parse(text: str) -> dict[str, float]:
    """The entries of an annotation value: key → until (Unix seconds). An entry that
    cannot be read is skipped, a value that is not a JSON object or is too large ignored,
    each with a warning."""
    if len(text) > MAX_VALUE_B:
        log.warning("lease %s: %s is %d bytes: ignored", LEASE, KEY, len(text))
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        log.warning("lease %s: %s is not a JSON object: ignored", LEASE, KEY)
        return {}
    out = {}
    for key, until in found.items():
        try:
            at = dt.datetime.strptime(until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        except (TypeError, ValueError):
            log.warning("lease %s: %s: %r is not a time: entry %r skipped", LEASE, KEY, until,
                        key)  # fmt: skip
            continue
        out[key] = at.timestamp()
    return out
