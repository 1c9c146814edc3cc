"""The leader's Events for GPU health: one on the Node each time the set of its GPUs not
offered to new GPU pods changes (:mod:`coordinator.scoring.gpuhealth`).

``GpuUnhealthy`` (Warning) names the GPUs and why; ``GpuHealthy`` (Normal) says every GPU
is offered again. Only a change of *which* GPUs are unhealthy is told — an XID growing
older or a count moving is not news — and a node whose agent went silent keeps its last
verdict untold until it reports again: silence is not health. Written through the shared
:class:`~coordinator.kube.events.EventRecorder` (fenced, rate-limited); while this replica
does not lead it remembers nothing, so a new leader tells each unhealthy node once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Final

from coordinator.kube.events import EventRecorder, EventType, ObjectRef
from coordinator.live import LiveCluster
from coordinator.scoring import gpuhealth

UNHEALTHY: Final = "GpuUnhealthy"
HEALTHY: Final = "GpuHealthy"


@dataclass(frozen=True, slots=True)
class Notice:
    node: str
    type: EventType
    reason: str
    message: str


@dataclass
class GpuHealthWatch:
    """Which GPUs of each node were last told unhealthy, and what changed since."""

    told: dict[str, frozenset[int]] = field(default_factory=dict)

    def changes(self, cluster: LiveCluster) -> list[Notice]:
        """The notices due now: nodes whose unhealthy GPUs differ from what was told."""
        settings = cluster.settings.signals.gpu_health
        for gone in [n for n in self.told if n not in cluster.specs]:
            del self.told[gone]
        looked = {n for n, s in cluster.signals.items() if s.gpu_faults} | set(self.told)
        notices = []
        for name in sorted(looked):
            signals = cluster.signals.get(name)
            if signals is None or name not in cluster.specs:
                continue  # silent or gone: nothing new to tell
            bad = gpuhealth.unhealthy(signals.gpu_faults, settings, aged=False)
            now = frozenset(bad)
            if now == self.told.get(name, frozenset()):
                continue
            if now:
                self.told[name] = now
                gpus = cluster.specs[name].gpus
                message = (
                    f"{len(now)} of {gpus} GPUs not offered to new GPU pods:"
                    f" {gpuhealth.summary(bad)}"
                )
                notices.append(Notice(name, EventType.WARNING, UNHEALTHY, message))
            else:
                del self.told[name]
                message = "every GPU offered to new GPU pods again"
                notices.append(Notice(name, EventType.NORMAL, HEALTHY, message))
        return notices


async def write_events(
    cluster: LiveCluster, recorder: EventRecorder, leader: asyncio.Event, period_s: float = 5.0
) -> None:
    """Tell every change as an Event every ``period_s`` while leading."""
    watch = GpuHealthWatch()
    while True:
        if not leader.is_set():
            watch.told.clear()
            await leader.wait()
        for notice in watch.changes(cluster):
            await asyncio.to_thread(
                recorder.record,
                ObjectRef.node(notice.node),
                notice.type,
                notice.reason,
                notice.message,
            )
        await asyncio.sleep(period_s)
