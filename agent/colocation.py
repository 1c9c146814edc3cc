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
section does not know yet is skipped until it does), each checked again against
:mod:`common.qos` by the agent's own view of it: the agent throttles only pods *it* sees as
best-effort, never a system pod (static or mirror, ``kube-system``, a ``system-*-critical``
class, priority ≥ 2,000,000,000) nor a Guaranteed or otherwise latency-sensitive one,
whatever a directive says (directives travel over plain HTTP by default). A refused pod is
logged once with the reason, counted per directive in
``stowage_agent_directive_refusals_total{reason}`` and reported in the enforcement's ``error``;
the directive's other pods are still throttled. The watch covers the other pods'
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from msgspec import structs

from agent import cgroups
from agent.enforcer import Applied, BePod
from agent.metrics import AgentMetrics
from agent.pressurewatch import POLL_S, PressureWatch, WatchSpec
from common import qos
from common.clock import Clock
from common.schema import MAX_TEXT, Directives, Enforcement, PodInfo, PodsSection

log = logging.getLogger(__name__)

TICK_S: Final = 1.0
"""Longest wait between two looks at the deadlines: a lapsed TTL is acted on within it."""

DirectivesSource = Callable[[], Directives | None]
"""The latest directives while their TTL lasts, else None (``Reporter.current_directives``)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A pod a directive named best-effort that this node will not throttle."""

    uid: str
    pod: str
    """``namespace/name``."""
    kind: str
    """``system`` or ``latency-sensitive`` (the metric's reason label)."""
    reason: str
    """Why, in words."""


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
        metrics: AgentMetrics | None = None,
    ) -> None:
        self._enforcer = enforcer
        self._metrics = metrics
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
        self._refused: tuple[Refusal, ...] = ()
        """The pods the directive in force names BE and this node refuses to throttle."""

    # ----------------------------------------------------------------- inputs

    def pods_seen(self, pods: PodsSection | None) -> None:
        """The pods section of this cycle's report (None: the node could not list them)."""
        if pods is not None:
            self._pods = pods

    def directives_arrived(self) -> None:
        """A report was accepted with directives: decide again (and re-assert)."""
        self.refresh(reassert=True)
        if self._metrics is not None:
            for refusal in self._refused:
                self._metrics.directive_refusals.labels(refusal.kind).inc()

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
            self._refused = ()
            self._set_watch(None, frozenset())
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
        be_pods, refused = admit(d.be_pods, self._pods)
        self._note_refusals(refused)
        self._set_watch(d, frozenset(p.uid for p in be_pods))
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
        """What the enforcer has applied now, for this cycle's report; the pods refused
        are told in its ``error`` (the channel the coordinator shows in /debug)."""
        applied = self._enforcer.current()
        if not self._refused:
            return applied
        told = "refused: " + "; ".join(f"{r.pod} (uid {r.uid}) {r.reason}" for r in self._refused)
        error = told if applied.error is None else f"{applied.error}; {told}"
        return structs.replace(applied, error=error[:MAX_TEXT])

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

    def _note_refusals(self, refused: tuple[Refusal, ...]) -> None:
        """Log each refusal once, when it first appears (directives repeat every report)."""
        seen = set(self._refused)
        for refusal in refused:
            if refusal not in seen:
                log.warning(
                    "directive: refused to throttle %s (uid %s), named best-effort: %s",
                    refusal.pod,
                    refusal.uid,
                    refusal.reason,
                )
        self._refused = refused

    def _set_watch(self, d: Directives | None, be: frozenset[str]) -> None:
        if self.watch is None or self._layout is None:
            return
        if d is None or d.local is None or self._pods is None:
            self.watch.watch(None)
            return
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


def admit(
    named: Iterable[str], pods: PodsSection | None
) -> tuple[tuple[BePod, ...], tuple[Refusal, ...]]:
    """The pods of ``named`` (a directive's BE UIDs) this node agrees are best-effort, by
    :mod:`common.qos` over its own pods section, and those it refuses. A UID the section
    does not know is in neither: skipped until the section shows it."""
    known = {p.uid: p for p in pods.pods} if pods is not None else {}
    admitted: list[BePod] = []
    refused: list[Refusal] = []
    for uid in sorted(set(named)):
        pod = known.get(uid)
        if pod is None:
            continue
        refusal = _refusal(pod)
        if refusal is None:
            admitted.append(BePod(uid, pod.qos_class, pod.requests.cpu_m))
        else:
            refused.append(refusal)
    return tuple(admitted), tuple(refused)


def _refusal(pod: PodInfo) -> Refusal | None:
    """Why this node will not throttle ``pod``; None when it is best-effort here too."""
    kind = qos.classify(pod, qos.LABEL)
    if kind is qos.BE:
        return None
    name = f"{pod.namespace}/{pod.name}"
    if kind is qos.SYSTEM:
        return Refusal(pod.uid, name, "system", f"is a system pod: {qos.system_reason(pod)}")
    said = [f"{k}={pod.labels[k]}" for k in (qos.LABEL, qos.KOORDINATOR_LABEL) if k in pod.labels]
    labels = f"labelled {', '.join(said)}" if said else "no BE label"
    return Refusal(
        pod.uid, name, "latency-sensitive", f"is latency-sensitive: {pod.qos_class}, {labels}"
    )


def _latency_sensitive(pod: PodInfo, be: frozenset[str]) -> bool:
    """Not a BE pod this node throttles, and not a BestEffort pod by QoS class."""
    return pod.uid not in be and pod.qos_class != "BestEffort" and pod.phase == "Running"
