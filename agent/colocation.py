"""Which best-effort CPU quota holds on this node right now, and handing it to the enforcer.

Three sources, in this order (DESIGN §3, "fail safe"):

1. **No valid directive** — none heard yet, or the last one's TTL has passed (the
   coordinator died, or this node is cut off): the node's defaults. Everything the
   enforcer changed is restored, and any local tightening ends with the bounds it came from.
2. **A local tightening** — the LS pressure watch (:mod:`agent.pressurewatch`) saw LS stall at
   or above ``local.pressure_high_pct``: BE goes to ``local.quota_m`` (never looser than the
   directive's own quota) at once, for ``local.hold_s`` after the last breach. It ends
   early when a directive *confirms* it (the coordinator's own quota is as tight or
   tighter: from then on that quota rules), or withdraws the bounds (``local`` None).
3. **The coordinator's quota** — ``be_cpu_quota_m`` of the directive, None meaning the
   defaults.

BE pods are the directive's ``be_pods`` joined with the last pods section (a UID the
section does not know yet is skipped until it does). The watch covers the other pods'
``cpu.pressure`` in the cgroup2 tree, BestEffort pods excepted: the latency-sensitive ones.

:meth:`BeThrottle.refresh` runs after every accepted report (re-asserting the quota:
kubelet rewrites QoS shares about once a minute) and whenever a deadline (TTL, hold) may
have passed; :meth:`BeThrottle.on_pressure` runs at each breach. Both only call the
enforcer when the decision differs from the last one, or when asked to re-assert.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final, Protocol

from agent import cgroups
from agent.enforcer import Applied, BePod
from agent.pressurewatch import POLL_S, PressureWatch, WatchSpec
from common.clock import Clock
from common.schema import Directives, Enforcement, PodInfo, PodsSection

log = logging.getLogger(__name__)

TICK_S: Final = 1.0
"""Longest wait between two looks at the deadlines: a lapsed TTL is acted on within it."""

DirectivesSource = Callable[[], Directives | None]
"""The latest directives while their TTL lasts, else None (``Reporter.current_directives``)."""


class EnforcerLike(Protocol):
    """What :class:`BeThrottle` needs of :class:`agent.enforcer.Enforcer`."""

    def apply(self, quota_m: int | None, be_pods: list[BePod], source: str = ...) -> Applied: ...
    def restore_all(self) -> Applied: ...
    def current(self) -> Enforcement: ...


class BeThrottle:
    """The agent's side of colocation: decides, applies through the enforcer, reports."""

    def __init__(
        self,
        enforcer: EnforcerLike,
        clock: Clock,
        directives: DirectivesSource,
        layout: cgroups.CgroupLayout | None = None,
        *,
        poll_s: float = POLL_S,
    ) -> None:
        self._enforcer = enforcer
        self._clock = clock
        self._directives = directives
        self._layout = layout
        self.watch = PressureWatch(clock, self.on_pressure, poll_s) if layout is not None else None
        """The LS pressure watch; None without a cgroup layout (nothing to watch)."""
        self._pods: PodsSection | None = None
        self._local_until: float | None = None
        """Monotonic time the current local tightening ends; None: none in force."""
        self._local_quota: int | None = None
        self._decided: tuple[int | None, str, tuple[BePod, ...]] | None = None
        """The last (quota, source, pods) handed to the enforcer."""
        self._wake = asyncio.Event()
        self._last_error: str | None = None

    # ----------------------------------------------------------------- inputs

    def pods_seen(self, pods: PodsSection | None) -> None:
        """The pods section of this cycle's report (None: the node could not list them)."""
        if pods is not None:
            self._pods = pods

    def directives_arrived(self) -> None:
        """A report was accepted with directives: decide again (and re-assert)."""
        self.refresh(reassert=True)

    def on_pressure(self, _path: object, _share: float) -> None:
        """An LS pod's stall crossed the bounds' threshold: tighten BE now, within them."""
        d = self._directives()
        if d is None or d.local is None:
            return
        quota = d.local.quota_m
        if d.be_cpu_quota_m is not None:
            # A coordinator at least as tight already confirms it: refresh() keeps its quota.
            quota = min(quota, d.be_cpu_quota_m)
        self._local_until = self._clock.monotonic() + d.local.hold_s
        self._local_quota = quota
        self.refresh()
        self._wake.set()  # the hold's end is a new deadline

    # --------------------------------------------------------------- deciding

    def refresh(self, *, reassert: bool = False) -> None:
        """Decide from the directive in force now; hand a new decision to the enforcer."""
        d = self._directives()
        now = self._clock.monotonic()
        if d is None:
            self._local_until = self._local_quota = None
            self._set_watch(None)
            if self._decided != (None, "default", ()) or reassert:
                self._decided = (None, "default", ())
                self._report(self._enforcer.restore_all())
            return
        if self._local_until is not None and (
            now >= self._local_until
            or d.local is None
            or (d.be_cpu_quota_m is not None and d.be_cpu_quota_m <= (self._local_quota or 0))
        ):
            self._local_until = self._local_quota = None  # lapsed, withdrawn or confirmed
        be_pods = self._be_pods(d)
        self._set_watch(d)
        if self._local_until is not None:
            decision = (self._local_quota, "local", be_pods)
        else:
            decision = (d.be_cpu_quota_m, "coordinator", be_pods)
        if decision == self._decided and not reassert:
            return
        self._decided = decision
        quota, source, pods = decision
        self._report(self._enforcer.apply(quota, list(pods), source))

    def status(self) -> Enforcement:
        """What the enforcer has applied now, for this cycle's report."""
        return self._enforcer.current()

    def next_deadline(self) -> float:
        """Seconds until a decision may change without any input (hold end, or the tick)."""
        if self._local_until is None:
            return TICK_S
        return max(0.0, min(TICK_S, self._local_until - self._clock.monotonic()))

    async def run(self) -> None:
        """Watch LS pressure and re-decide at each deadline (TTL lapse, hold end) until
        cancelled; then restore the node's defaults (SIGTERM: a stopped agent must not
        leave BE throttled with nobody to release it)."""
        watching = asyncio.create_task(self.watch.run()) if self.watch is not None else None
        try:
            while True:
                # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that
                # races a wake-up (set ten times a second while LS stalls).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.next_deadline()):
                        await self._wake.wait()
                self._wake.clear()
                self.refresh()
        finally:
            if watching is not None:
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)
            self._report(self._enforcer.restore_all())
            self._decided = (None, "default", ())

    # -------------------------------------------------------------- internals

    def _be_pods(self, d: Directives) -> tuple[BePod, ...]:
        known = {p.uid: p for p in self._pods.pods} if self._pods is not None else {}
        return tuple(
            BePod(uid, known[uid].qos_class, known[uid].requests.cpu_m)
            for uid in sorted(set(d.be_pods))
            if uid in known
        )

    def _set_watch(self, d: Directives | None) -> None:
        if self.watch is None or self._layout is None:
            return
        if d is None or d.local is None or self._pods is None:
            self.watch.watch(None)
            return
        be = set(d.be_pods)
        paths = tuple(
            psi / "cpu.pressure"
            for p in self._pods.pods
            if _latency_sensitive(p, be)
            and (psi := self._layout.pod_psi_dir(p.qos_class, p.uid)) is not None
            and (psi / "cpu.pressure").exists()
        )
        self.watch.watch(WatchSpec(paths, d.local.pressure_high_pct, d.local.window_s))

    def _report(self, applied: Applied) -> None:
        """Log an enforcement failure once when it starts or changes, not every call."""
        if applied.error and applied.error != self._last_error:
            log.warning("enforcer: %s", applied.error)
        self._last_error = applied.error


def _latency_sensitive(pod: PodInfo, be: set[str]) -> bool:
    """Not a BE pod by the directive, and not a BestEffort pod by QoS class."""
    return pod.uid not in be and pod.qos_class != "BestEffort" and pod.phase == "Running"
