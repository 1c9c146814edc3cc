"""How late the event loop runs what is due: the readiness of a replica that is alive but
too busy to answer schedulers in time.

Every scheduler call, report and probe is answered on one event loop. A loop that is
blocked answers nothing, and the kubelet's probe times out; but a loop that is only
lagging (a long callback, a burst of work, CPU starved by its limit) still answers
``/readyz`` — late, and "ready". kube-scheduler meanwhile waits its ``httpTimeout`` on
every call to this replica. So readiness fails while the loop lags more than
``server.ready_max_loop_lag_s``: the Service then sends the schedulers to the other
replicas (every replica answers the extender), and this one returns once it keeps up.

The lag is measured by a task that sleeps a short period and notes how much later than
asked it woke. The last such figure can be stale: a loop blocked for seconds has not
woken the task yet when it first answers a probe again, so the lag reported is also at
least how overdue the next wake-up is.
"""

from __future__ import annotations

import asyncio
from typing import Final

from common.clock import Clock

PERIOD_S: Final = 0.1
"""How often the lag is sampled: finer than any limit worth setting, cheap (ten timer
callbacks a second)."""


class LoopLag:
    """The event loop's lag, as of its latest sample or the one now overdue."""

    def __init__(self, clock: Clock, period_s: float = PERIOD_S) -> None:
        self._clock = clock
        self._period_s = period_s
        self._latest_s = 0.0
        self._due = clock.monotonic() + period_s

    def lag_s(self) -> float:
        """Seconds the loop is behind now: the latest sample's, or how long the next
        sample is overdue, whichever is more."""
        return max(self._latest_s, self._clock.monotonic() - self._due)

    def woke(self) -> None:
        """The sampling task woke: record how late, and when it is next due."""
        now = self._clock.monotonic()
        self._latest_s = max(0.0, now - self._due)
        self._due = now + self._period_s

    async def run(self) -> None:
        """Sample until cancelled (the first sample is due one period from now, not from
        when this was made: the app may take a while to start)."""
        self._due = self._clock.monotonic() + self._period_s
        while True:
            await asyncio.sleep(self._period_s)
            self.woke()
