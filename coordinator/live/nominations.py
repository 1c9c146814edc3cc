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

**Reservations** are nominations of a pod that does not exist yet: when a migration or a
drain moves a pod, its controller creates a replacement (another name, another uid), and
the plan counted on that replacement landing on the pod's new home. So the leader
reserves the home, in the same annotation::

    stowage.io/nominations: team-a/web-7d9c-x2@9a1b…>team-a/train-7=2026-12-07T13:05:00Z;at=…

(``namespace/moved-pod@controller-uid>what-the-plan-made-room-for=until``; the last is the
pending pod ``namespace/name`` a migration made room for, or ``drain/NODE``). The room is
held for a pending pod of that namespace whose controller (its ``ownerReferences`` entry
with ``controller: true``) has that uid — never for a label: a pod's owner writes its
labels, and could otherwise claim any room; it can name any controller uid, but only
within its own namespace, whose workloads are its own. Several reservations of one
controller go to its pending pods one each, by name (every replica matches them alike),
and such a pod is steered to its reserved node. A reservation holds what its pending pod
requests, so it holds nothing until the replacement exists (the controller creates it
the moment the eviction is accepted) or once no pod of the controller is pending; the
leader drops it then (the replacement bound), when its plan is dropped (the pending pod
gone, the drain abandoned) or when it expires.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
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
    made_for: str | None = None
    """None for a pending pod's nomination (``uid`` is the pod's). For a reservation,
    what the plan made room for (a pending pod's ``namespace/name``, or ``drain/NODE``):
    ``pod`` is the moved pod and ``uid`` its controller's, whose next pending pod in
    ``pod``'s namespace the room is held for."""

    @property
    def namespace(self) -> str:
        return self.pod.partition("/")[0]

    @property
    def reservation(self) -> bool:
        return self.made_for is not None

    @property
    def who(self) -> str:
        """The entry's key in the annotation."""
        tail = "" if self.made_for is None else f">{self.made_for}"
        return f"{self.pod}@{self.uid}{tail}"


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
    """The annotation's value for the newest of ``entries`` (the last ones) that fit
    :data:`MAX_PER_NODE` and :data:`MAX_VALUE_B` (None: remove it): a value past either
    would be ignored whole."""
    kept = list(entries[-MAX_PER_NODE:])
    while kept:
        text = ann.value({e.who: ann.timestamp(e.until) for e in kept}, now)
        if len(text) <= MAX_VALUE_B:
            return text
        kept.pop(0)
    return None


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
        pod, _, rest = who.rpartition("@")
        uid, marked, made_for = rest.partition(">")
        try:
            at = dt.datetime.strptime(until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        except ValueError:
            log.warning("node %s: %s: %r is not a time: ignored", node, KEY, until)
            return ()
        if not pod or not uid or "/" not in pod or (marked and not made_for):
            log.warning("node %s: %s: %r is not namespace/name@uid[>for]: ignored", node, KEY, who)
            return ()
        out.append(Nomination(pod, uid, node, at.timestamp(), made_for if marked else None))
    return tuple(out)


def matched(
    reservations: Iterable[Nomination], pending: Mapping[tuple[str, str], Sequence[str]]
) -> dict[str, Nomination]:
    """Pending pod uid → the reservation its room is held by: each controller's
    reservations (by node, then time) given to its pending pods one each, in the order
    ``pending`` lists them (by ``(namespace, controller uid)``); a reservation left over
    holds nothing, nor does a pod left over."""
    by_controller: dict[tuple[str, str], list[Nomination]] = {}
    for entry in reservations:
        if entry.reservation:
            by_controller.setdefault((entry.namespace, entry.uid), []).append(entry)
    found: dict[str, Nomination] = {}
    for key, entries in by_controller.items():
        entries.sort(key=lambda e: (e.node, e.until))
        for uid, entry in zip(pending.get(key, ()), entries, strict=False):
            found[uid] = entry
    return found
