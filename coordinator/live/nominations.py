"""Room a preemption freed, held for the pod it was freed for, as kube-scheduler's
``nominatedNodeName`` holds it — until the pod binds or the nomination expires.

When the leader evicts pods so that a pending pod fits on a node, the room it made must
not go to the next pod that asks: the preemptor would find its room gone, and the
evictions would have been for nothing. So the leader *nominates* the preemptor to the
node, in the Node's annotation :data:`KEY`::

    stowage.io/nominations: team-a/train-7@5f3c…=2026-12-07T13:05:00Z;at=2026-12-07T13:03:00Z

(each entry ``namespace/name@uid=until``). Every replica reads it from its Node watch, so
every replica's filter and prioritize hold the room alike: a pod is judged as if each
pod nominated to a node already ran there — unless it is that pod, or of higher priority
(kube-scheduler's rule: a nominated pod yields to a more important one). What a
nominated pod holds comes from the Pod watch (its requests, its priority); the
annotation says only who and until when, so an entry naming no pending pod holds
nothing. The eviction planner counts the nominated pods too (they are not victims: they
do not run yet), so no two plans promise one node's room.

Who can write the annotation: the coordinator (leader-fenced), cluster admins, and the
node's own kubelet, which could only make its own node look fuller — what its agent's
reports could do anyway. A pod's owner cannot (Nodes are cluster-scoped). An annotation
that cannot be read, or one with more than :data:`MAX_PER_NODE` entries, is ignored
whole, with a warning.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from common import annotations as ann

log = logging.getLogger(__name__)

KEY: Final = ann.PREFIX + "nominations"
MAX_PER_NODE: Final = 16
"""More preemptors waiting on one node than this is not a plan Stowage makes (each round
evicts for one pod, a round per queue per cooldown): the annotation is not Stowage's."""
MAX_VALUE_B: Final = 4096


@dataclass(frozen=True, slots=True)
class Nomination:
    pod: str
    """``namespace/name``, for people and Events."""
    uid: str
    node: str
    until: float
    """Unix seconds: after this, the room is open to every pod again."""


class Nominations:
    """Every node's nominations, as its Node object says."""

    def __init__(self) -> None:
        self._by_node: dict[str, tuple[Nomination, ...]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_node)

    def observe(self, node: str, annotations: Mapping[str, str] | None) -> None:
        """A Node as the watch has it (or as the leader just wrote it)."""
        text = (annotations or {}).get(KEY)
        found = parse(node, text) if text else ()
        if found:
            self._by_node[node] = found
        else:
            self._by_node.pop(node, None)

    def forget(self, node: str) -> None:
        self._by_node.pop(node, None)

    def on(self, node: str) -> tuple[Nomination, ...]:
        return self._by_node.get(node, ())

    def active(self, now: float) -> Iterator[Nomination]:
        """The nominations not yet expired at ``now`` (Unix seconds)."""
        for entries in self._by_node.values():
            for entry in entries:
                if entry.until > now:
                    yield entry

    def nodes(self) -> list[str]:
        return sorted(self._by_node)


def value(entries: tuple[Nomination, ...], now: float) -> str | None:
    """The annotation's value for ``entries`` (None: remove it)."""
    if not entries:
        return None
    return ann.value({f"{e.pod}@{e.uid}": ann.timestamp(e.until) for e in entries}, now)


def parse(node: str, text: str) -> tuple[Nomination, ...]:
    """The entries of an annotation value; none (and a warning) when it cannot be read."""
    if len(text) > MAX_VALUE_B:
        log.warning("node %s: %s is %d bytes: ignored", node, KEY, len(text))
        return ()
    pairs, _ = ann.parse(text)
    if len(pairs) > MAX_PER_NODE:
        log.warning("node %s: %s has %d entries: ignored", node, KEY, len(pairs))
        return ()
    out = []
    for who, until in pairs.items():
        pod, _, uid = who.rpartition("@")
        try:
            at = dt.datetime.strptime(until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        except ValueError:
            log.warning("node %s: %s: %r is not a time: ignored", node, KEY, until)
            return ()
        if not pod or not uid or "/" not in pod:
            log.warning("node %s: %s: %r is not namespace/name@uid: ignored", node, KEY, who)
            return ()
        out.append(Nomination(pod, uid, node, at.timestamp()))
    return tuple(out)
