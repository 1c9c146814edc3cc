"""The leader reserving the new homes of the pods a migration or a drain moved, for their
replacements, and ending those reservations (:mod:`coordinator.live.nominations` says what
a reservation is and how every replica's filter holds it).

A plan moves a pod by evicting it; its controller creates the replacement, which the
plan counted on landing on the destination it found room on. The controller does so the
moment the eviction is accepted, and kube-scheduler may place it within milliseconds — so
each moved pod's destination is reserved *before* the executor gets the round (never in
dry run), for ``evictions.reservation_ttl_s``, keyed by the namespace and its
controller's uid as the plan saw them (on the live pod), and told by a ``RoomReserved``
Event on the node. While the moved pod is still there (the round refused, awaiting
approval, cut short) a reservation holds nothing — no replacement of it is pending — and
the next cycle's same plan finds it in place (its time renewed, told once). Each cycle the
leader drops a reservation

* once the moved pod is gone and the reservation holds room for no pending pod (none of
  that controller is pending in the namespace, but for those holding room elsewhere): the
  replacement was bound (the controller creates it the moment the eviction is accepted,
  so by the next cycle it exists) — ``ReservationReleased``;
* once its plan is dropped: the pending pod a migration made room for is gone, or the
  drain's node is no longer tainted for draining (abandoned) — ``ReservationReleased``;
* when it expires unused — ``ReservationExpired``.

Every write is the eviction cycle's own (:meth:`coordinator.eviction.cycle.Cycle.write`,
fenced by the executor); every Event goes through the fenced recorder.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from common import annotations as ann
from coordinator.config import EvictionSettings
from coordinator.consolidation.drain import DISRUPTED, Move
from coordinator.eviction.executor import Recorder
from coordinator.kube.events import EventType, ObjectRef
from coordinator.live import LiveCluster
from coordinator.live.nominations import Nomination

log = logging.getLogger(__name__)

RESERVED: Final = "RoomReserved"
RELEASED: Final = "ReservationReleased"
EXPIRED: Final = "ReservationExpired"
DRAIN: Final = "drain/"
"""What a drain's reservations say they were made for: ``drain/NODE``."""

Write = Callable[[str, tuple[Nomination, ...], float], Awaitable[bool]]
""":meth:`coordinator.eviction.cycle.Cycle.write`: a node's nominations, written whole."""


def for_drain(node: str) -> str:
    return DRAIN + node


class Reserver:
    def __init__(
        self,
        cluster: LiveCluster,
        settings: EvictionSettings,
        write: Write,
        recorder: Recorder,
    ) -> None:
        self._cluster = cluster
        self._settings = settings
        self._write = write
        self._recorder = recorder

    async def reserve(self, moves: Iterable[Move], made_for: str) -> list[Nomination]:
        """Reserve each of ``moves``' destination for its pod's replacement (called right
        before the round moving them goes to the executor); ``made_for`` is the pending
        pod's ``ns/name``, or :func:`for_drain`. A moved pod without a controller the live
        view knows gets none (nothing recreates it). What was written."""
        cluster = self._cluster
        now = cluster.clock.wall()
        until = now + self._settings.reservation_ttl_s
        by_node: dict[str, list[Nomination]] = {}
        for move in moves:
            facts = cluster.facts.get(move.uid)
            if facts is None or facts.controller_uid is None:
                continue
            entry = Nomination(facts.key, facts.controller_uid, move.destination, until, made_for)
            by_node.setdefault(move.destination, []).append(entry)
        written: list[Nomination] = []
        for node, new in sorted(by_node.items()):
            keys = {e.who for e in new}
            there = cluster.nominations.on(node)
            told = {e.who for e in there if e.until > now}  # the same plan's, a cycle ago
            kept = tuple(e for e in there if e.until > now and e.who not in keys)
            if not await self._write(node, (*kept, *new), now):
                continue
            held = {e.who for e in cluster.nominations.on(node)}
            for entry in new:
                if entry.who in held:
                    written.append(entry)
                    if entry.who in told:
                        continue
                    await self._tell(
                        entry,
                        RESERVED,
                        f"room held for the replacement of {entry.pod} (controller"
                        f" {entry.uid}) until {ann.timestamp(until)}, as planned for"
                        f" {made_for}",
                    )
        return written

    async def tidy(self) -> None:
        """Drop the reservations that are done (see the module), each told on its node."""
        cluster = self._cluster
        now = cluster.clock.wall()
        holding = {entry for entry, holder in cluster.held_room() if holder is not None}
        for node in cluster.nominations.nodes():
            ended = {
                entry: why
                for entry in cluster.nominations.on(node)
                if entry.reservation
                and (why := self._done(entry, now, entry in holding)) is not None
            }
            await self._end(node, ended)

    async def _end(self, node: str, ended: dict[Nomination, tuple[str, str]]) -> None:
        """Write ``node``'s nominations without ``ended``, telling each its (reason,
        message) once written."""
        if not ended:
            return
        cluster = self._cluster
        kept = tuple(e for e in cluster.nominations.on(node) if e not in ended)
        if await self._write(node, kept, cluster.clock.wall()):
            for entry, (reason, message) in ended.items():
                await self._tell(entry, reason, message)

    def _done(self, entry: Nomination, now: float, holding: bool) -> tuple[str, str] | None:
        """(reason, message) when ``entry`` (``holding`` room for a pending pod now) is
        to be dropped; None while it holds."""
        cluster = self._cluster
        ttl = self._settings.reservation_ttl_s
        if entry.until <= now:
            return EXPIRED, (
                f"the room on {entry.node} held for the replacement of {entry.pod} was not"
                f" used within {ttl:g}s: it is open to other pods again"
            )
        if entry.pod not in cluster.pods and not holding:
            return RELEASED, (
                f"no pod of {entry.pod}'s controller is pending: its replacement was"
                f" placed (room on {entry.node} released)"
            )
        made_for = entry.made_for or ""
        if made_for.startswith(DRAIN):
            drained = made_for.removeprefix(DRAIN)
            node = cluster.node_facts.get(drained)
            if node is None or all(t.key != DISRUPTED for t in node.taints):
                return RELEASED, (
                    f"the drain of {drained} was abandoned (room on {entry.node} held for"
                    f" the replacement of {entry.pod} released)"
                )
        elif made_for not in cluster.pods:
            return RELEASED, (
                f"{made_for}, which the migration made room for, is gone (room on"
                f" {entry.node} held for the replacement of {entry.pod} released)"
            )
        return None

    async def _tell(self, entry: Nomination, reason: str, message: str) -> None:
        log.info("%s %s: %s", reason, entry.node, message)
        await asyncio.to_thread(
            self._recorder.record, ObjectRef.node(entry.node), EventType.NORMAL, reason, message
        )
