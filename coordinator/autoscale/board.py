"""The hints' shared state on one replica: the queues' bounds (fed by the watches), and
the latest hints worked out from them (for ``/debug/hints``, the metrics and the teller).

One per coordinator, shared by the main application (its watches and the hint loop) and
the debug listener's (``/debug/hints``), as the patrol is.
"""

from __future__ import annotations

from collections.abc import Callable

from common.clock import Clock
from coordinator.autoscale import hints
from coordinator.autoscale.capacity import Capacities
from coordinator.config import AutoscaleSettings
from coordinator.live import LiveCluster


class Board:
    def __init__(self, cluster: LiveCluster, settings: AutoscaleSettings, clock: Clock) -> None:
        self.cluster = cluster
        self.settings = settings
        self.clock = clock
        self.capacities = Capacities()
        self.latest = hints.Hints()
        self.computed_at: float | None = None
        """Unix seconds of :attr:`latest`; None before the first round."""

    def planner(self) -> Callable[[], hints.Hints]:
        """The blocking call that works the hints out over a view taken now (on the
        event loop), for a worker thread."""
        view = hints.view_of(self.cluster, self.capacities, self.settings)
        return lambda: hints.plan(view, self.settings)

    def keep(self, found: hints.Hints) -> None:
        self.latest = found
        self.computed_at = self.clock.wall()
