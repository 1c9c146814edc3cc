"""The per-node best-effort CPU throttle: pure functions over a small state, on the
coordinator's monotonic clock.

:func:`step` takes a node's previous :class:`Throttle`, the facts of its latest fresh
report (None when it has none: stale or never reported) and the time, and returns the
next :class:`Throttle`. Nothing else is read or written, so the same reports at the same
times give the same throttles on every replica.

Pressure mode (LS stall known, :mod:`~coordinator.colocation.inputs`):

* **tighten** once the stall has stayed at or above ``pressure_high_pct`` for
  ``tighten_after_s`` without a break: the quota becomes ``tighten_factor`` × what BE had
  (its quota, else its measured use, else what LS leaves), never below the floor; the
  dwell restarts, so sustained pressure tightens again only after another full dwell;
* **relax** once it has stayed at or below ``pressure_low_pct`` for ``relax_after_s``: one
  bounded step of ``relax_step_pct`` of allocatable; a quota reaching allocatable is
  released (None);
* in between, the quota holds and both dwells restart (hysteresis): a pressure jittering
  around either threshold never completes a dwell, so it never flaps.

The dwell counts what a report proves. Where the stall figure is an LS pod's rate
(``NodeInput.pressure_rate``: the measured share over the whole interval since the agent's
previous sample), a high condition that first shows on that report has held since the start
of the interval it covers, so the dwell starts ``covered_s`` before ``now`` (the caller
passes the interval: :mod:`~coordinator.colocation.hub`). One report whose rate is at or above
the threshold over ``tighten_after_s`` or more thus tightens at once; one over a shorter
interval still waits for the next. An avg10 or a usage watermark proves nothing about the
time before it was read: its dwell starts at ``now``. Relaxation is not brought forward:
letting BE loose again is the step that may hurt LS, so it keeps waiting its full dwell.

Usage mode (no PSI on the node): Koordinator's watermark. While node use stays at or above
``usage_threshold_pct`` of allocatable for ``tighten_after_s``, the quota becomes
allocatable × threshold − LS use (at least the floor, at most the current quota); once
use stays ``usage_band_pct`` points below the threshold for ``relax_after_s``, it relaxes
by the same bounded steps.

No fresh report, a pool with colocation off, or no allocatable CPU known: released, at
once — a throttle is never kept on facts that may no longer be true.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from common.schema import LocalBounds
from coordinator.colocation.inputs import NodeInput, Source
from coordinator.config import ColocationPool


class Change(StrEnum):
    """What one step did to the quota (the Event's reason and the metric's label)."""

    NONE = "none"
    TIGHTENED = "tightened"
    RELAXED = "relaxed"
    RELEASED = "released"


@dataclass(frozen=True, slots=True)
class Throttle:
    """A node's throttle and the dwell timers that lead to its next change."""

    quota_m: int | None = None
    """BE CPU quota in millicores; None: no throttle, the node's defaults."""
    reason: str = "no report yet"
    above_since: float | None = None
    """Monotonic time the high condition has held since, without a break."""
    below_since: float | None = None
    changed_at: float | None = None
    """When the quota last changed (monotonic)."""
    change: Change = Change.NONE
    """What the step that made this throttle did."""


RELEASED = Throttle()
_UNCHANGED: Final = Change.NONE
_NONE: Final = Source.NONE


def floor_m(pool: ColocationPool, allocatable_m: int) -> int:
    """The least quota BE may be left with on a node of this allocatable CPU."""
    return max(pool.floor_min_m, int(allocatable_m * pool.floor_pct / 100))


def step(
    prev: Throttle,
    facts: NodeInput | None,
    pool: ColocationPool,
    now: float,
    covered_s: float = 0.0,
) -> Throttle:
    """The next throttle of a node (see the module). ``covered_s``: the time the report's
    stall rate covers (0 when not known); used only where the figure is a rate. Runs on
    every report: reason texts are formatted only where they change."""
    if facts is None:
        return _release(prev, "no fresh report: released", now)
    if not pool.enabled:
        return _release(prev, f"colocation off in pool {pool.name}", now)
    alloc = facts.allocatable_m
    if alloc is None:
        return _release(prev, "allocatable CPU unknown: released", now)
    if not facts.be_pods:
        return _release(prev, "no best-effort pods on the node", now)
    pressure = facts.pressure_pct
    covered = covered_s if facts.pressure_rate and facts.source is Source.LS_PODS else 0.0
    if facts.source is not _NONE:
        assert pressure is not None
        high, low = pressure >= pool.pressure_high_pct, pressure <= pool.pressure_low_pct
    elif facts.node_used_m is not None:
        used = 100.0 * facts.node_used_m / alloc
        high = used >= pool.usage_threshold_pct
        low = used <= pool.usage_threshold_pct - pool.usage_band_pct
    else:
        return _release(prev, "neither PSI nor CPU use reported: released", now)
    quota = prev.quota_m
    if high:
        since = prev.above_since if prev.above_since is not None else now - covered
        if now - since < pool.tighten_after_s:
            if quota is not None:
                return _holding(prev, since, None)
            waiting = f"no throttle yet: {_why(facts, pool, alloc, True, covered)}"
            return Throttle(None, waiting, since, None, prev.changed_at, _UNCHANGED)
        tightened = _tightened(prev, facts, pool, alloc)
        if tightened == quota:  # at the floor already
            return Throttle(quota, prev.reason, now, None, prev.changed_at, _UNCHANGED)
        reason = f"tightened: {_why(facts, pool, alloc, True, covered)}"
        return Throttle(tightened, reason, now, None, now, Change.TIGHTENED)
    if low and quota is not None:
        since = prev.below_since if prev.below_since is not None else now
        if now - since < pool.relax_after_s:
            return _holding(prev, None, since)
        relaxed = quota + int(alloc * pool.relax_step_pct / 100)
        reason = _why(facts, pool, alloc, False, covered)
        if relaxed >= alloc:
            return Throttle(None, f"released: {reason}", None, None, now, Change.RELEASED)
        return Throttle(relaxed, f"relaxed: {reason}", None, now, now, Change.RELAXED)
    if quota is not None:
        return _holding(prev, None, None)
    return Throttle(
        None,
        f"no throttle: {_what(facts, alloc, covered)}",
        None,
        None,
        prev.changed_at,
        _UNCHANGED,
    )


def _holding(prev: Throttle, above_since: float | None, below_since: float | None) -> Throttle:
    """The quota and its reason held, with these dwell timers."""
    if (prev.above_since, prev.below_since, prev.change) == (above_since, below_since, _UNCHANGED):
        return prev
    return Throttle(
        prev.quota_m, prev.reason, above_since, below_since, prev.changed_at, _UNCHANGED
    )


def _what(facts: NodeInput, alloc: int, covered_s: float) -> str:
    """The figure judged, and which one: a rate says the time it covers."""
    if facts.source is Source.LS_PODS and facts.pressure_rate:
        if covered_s > 0:
            return f"LS cpu some {facts.pressure_pct:.1f}% over the last {_seconds(covered_s)}s"
        return f"LS cpu some {facts.pressure_pct:.1f}% since the previous sample"
    if facts.source is not _NONE:
        return f"LS cpu some avg10 {facts.pressure_pct:.1f}%"
    assert facts.node_used_m is not None
    return f"node CPU use {100.0 * facts.node_used_m / alloc:.1f}%"


def _seconds(span_s: float) -> str:
    """A span for a reason: whole seconds from 10 s up, two significant digits below, so a
    sub-second report interval reads "0.1s", not "0s"."""
    return f"{span_s:.0f}" if span_s >= 10 else f"{span_s:.2g}"


def _why(facts: NodeInput, pool: ColocationPool, alloc: int, high: bool, covered_s: float) -> str:
    """The condition that held: the reason of a tightening (``high``) or a relaxation."""
    what = _what(facts, alloc, covered_s)
    if facts.source is _NONE:
        if high:
            return f"{what} >= {pool.usage_threshold_pct:g}% for {pool.tighten_after_s:g}s (no PSI)"
        limit = pool.usage_threshold_pct - pool.usage_band_pct
        return f"{what} <= {limit:g}% for {pool.relax_after_s:g}s (no PSI)"
    if high:
        text = f"{what} >= {pool.pressure_high_pct:g}% for {pool.tighten_after_s:g}s"
    else:
        text = f"{what} <= {pool.pressure_low_pct:g}% for {pool.relax_after_s:g}s"
    return text + " (node PSI)" if facts.source is Source.NODE else text


def _tightened(prev: Throttle, facts: NodeInput, pool: ColocationPool, alloc: int) -> int:
    floor = floor_m(pool, alloc)
    if facts.source is Source.NONE:  # the watermark: what the threshold leaves BE
        assert facts.ls_usage_m is not None or facts.node_used_m is not None
        ls = facts.ls_usage_m if facts.ls_usage_m is not None else 0
        target = int(alloc * pool.usage_threshold_pct / 100) - ls
        if prev.quota_m is not None:
            target = min(target, prev.quota_m)
        return max(floor, target)
    base = _base_m(prev.quota_m, facts, alloc)
    return max(floor, min(alloc, int(base * pool.tighten_factor)))


def _base_m(quota_m: int | None, facts: NodeInput, alloc: int) -> int:
    """What a tightening step (the controller's, or the agent's own) shrinks: the quota
    in force, else what BE was measured to use, else what LS leaves of the allocatable."""
    if quota_m is not None:
        return quota_m
    if facts.be_usage_m:
        return facts.be_usage_m
    return alloc - (facts.ls_usage_m or 0)


def _release(prev: Throttle, reason: str, now: float) -> Throttle:
    if prev.quota_m is None:
        return Throttle(None, reason, None, None, prev.changed_at, Change.NONE)
    return Throttle(None, reason, None, None, now, Change.RELEASED)


def local_bounds(
    throttle: Throttle, facts: NodeInput | None, pool: ColocationPool
) -> LocalBounds | None:
    """What the node's agent may do alone until its next report: tighten BE to half of
    what it has now (at least the floor, at most the current quota) once LS stall reaches
    the high threshold over ``local_window_s``. Only where the LS pods' own stall is
    measured (the agent watches their cgroups) and the pool allows it."""
    if facts is None or not pool.enabled or not pool.local or facts.source is not Source.LS_PODS:
        return None
    alloc = facts.allocatable_m
    if alloc is None:
        return None
    floor = floor_m(pool, alloc)
    quota = max(floor, int(_base_m(throttle.quota_m, facts, alloc) * pool.tighten_factor))
    if throttle.quota_m is not None:
        quota = min(quota, throttle.quota_m)
    return LocalBounds(
        pressure_high_pct=pool.pressure_high_pct,
        window_s=pool.local_window_s,
        quota_m=quota,
        hold_s=pool.local_hold_s,
    )


def reclaimable_m(facts: NodeInput | None, pool: ColocationPool) -> int | None:
    """Batch CPU the node can give BE pods: allocatable − LS use − the margin (≥ 0); None
    when not known."""
    if facts is None or facts.allocatable_m is None or facts.ls_usage_m is None:
        return None
    alloc = facts.allocatable_m
    margin = int(alloc * pool.reclaim_margin_pct / 100)
    return max(0, alloc - facts.ls_usage_m - margin)
