"""The leader's Events for colocation: one per best-effort throttle change, on the Node.

The controller (:mod:`coordinator.colocation.hub`) queues each change it decides; this
task, run by the app beside the leader's other writers, writes them through the shared
:class:`~coordinator.kube.events.EventRecorder` (fenced, rate-limited). While this replica
does not lead, queued changes are dropped: a follower steps reports only to be warm for a
takeover, and the leader of their time told them (or nobody should).
"""

from __future__ import annotations

import asyncio
from typing import Final

from coordinator.colocation.controller import Change
from coordinator.colocation.hub import Colocation
from coordinator.kube.events import EventRecorder, EventType, ObjectRef

REASONS: Final = {
    Change.TIGHTENED: "BestEffortThrottled",
    Change.RELAXED: "BestEffortRelaxed",
    Change.RELEASED: "BestEffortReleased",
}


async def write_events(
    hub: Colocation, recorder: EventRecorder, leader: asyncio.Event, period_s: float = 1.0
) -> None:
    """Drain ``hub.pending`` into Events every ``period_s`` while leading."""
    while True:
        if not leader.is_set():
            hub.pending.clear()
            await leader.wait()
        while hub.pending:
            node, throttle = hub.pending.popleft()
            kind = EventType.WARNING if throttle.change is Change.TIGHTENED else EventType.NORMAL
            quota = "none" if throttle.quota_m is None else f"{throttle.quota_m}m"
            message = f"best-effort CPU quota {quota}: {throttle.reason}"
            await asyncio.to_thread(
                recorder.record, ObjectRef.node(node), kind, REASONS[throttle.change], message
            )
        await asyncio.sleep(period_s)
