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

Usage mode (no PSI on the node): Koordinator's watermark. While node use stays at or above
``usage_threshold_pct`` of allocatable for ``tighten_after_s``, the quota becomes
allocatable × threshold − LS use (at least the floor, at most the current quota); once
use stays ``usage_band_pct`` points below the threshold for ``relax_after_s``, it relaxes
by the same bounded steps.

No fresh report, a pool with colocation off, or no allocatable CPU known: released, at
once — a throttle is never kept on facts that may no longer be true.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

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


def floor_m(pool: ColocationPool, allocatable_m: int) -> int:
    """The least quota BE may be left with on a node of this allocatable CPU."""
    return max(pool.floor_min_m, int(allocatable_m * pool.floor_pct / 100))


def step(prev: Throttle, facts: NodeInput | None, pool: ColocationPool, now: float) -> Throttle:
    """The next throttle of a node (see the module)."""
    if facts is None:
        return _release(prev, "no fresh report: released", now)
    if not pool.enabled:
        return _release(prev, f"colocation off in pool {pool.name}", now)
    alloc = facts.allocatable_m
    if alloc is None:
        return _release(prev, "allocatable CPU unknown: released", now)
    if not facts.be_pods:
        return _release(prev, "no best-effort pods on the node", now)
    if facts.source is not Source.NONE:
        assert facts.pressure_pct is not None
        value, what = facts.pressure_pct, f"LS cpu some avg10 {facts.pressure_pct:.1f}%"
        high, low = value >= pool.pressure_high_pct, value <= pool.pressure_low_pct
        high_text = f"{what} >= {pool.pressure_high_pct:g}% for {pool.tighten_after_s:g}s"
        low_text = f"{what} <= {pool.pressure_low_pct:g}% for {pool.relax_after_s:g}s"
        if facts.source is Source.NODE:
            high_text, low_text = high_text + " (node PSI)", low_text + " (node PSI)"
    elif facts.node_used_m is not None:
        used = 100.0 * facts.node_used_m / alloc
        value, what = used, f"node CPU use {used:.1f}%"
        high = used >= pool.usage_threshold_pct
        low = used <= pool.usage_threshold_pct - pool.usage_band_pct
        high_text = (
            f"{what} >= {pool.usage_threshold_pct:g}% for {pool.tighten_after_s:g}s (no PSI)"
        )
        low_text = (
            f"{what} <= {pool.usage_threshold_pct - pool.usage_band_pct:g}%"
            f" for {pool.relax_after_s:g}s (no PSI)"
        )
    else:
        return _release(prev, "neither PSI nor CPU use reported: released", now)
    if high:
        since = prev.above_since if prev.above_since is not None else now
        if now - since < pool.tighten_after_s:
            waiting = prev.reason if prev.quota_m is not None else f"no throttle yet: {high_text}"
            return replace(
                prev, reason=waiting, above_since=since, below_since=None, change=Change.NONE
            )
        quota = _tightened(prev, facts, pool, alloc)
        if quota == prev.quota_m:  # at the floor already
            return replace(prev, above_since=now, below_since=None, change=Change.NONE)
        return Throttle(quota, f"tightened: {high_text}", now, None, now, Change.TIGHTENED)
    if low and prev.quota_m is not None:
        since = prev.below_since if prev.below_since is not None else now
        if now - since < pool.relax_after_s:
            return replace(prev, above_since=None, below_since=since, change=Change.NONE)
        quota = prev.quota_m + int(alloc * pool.relax_step_pct / 100)
        if quota >= alloc:
            return Throttle(None, f"released: {low_text}", None, None, now, Change.RELEASED)
        return Throttle(quota, f"relaxed: {low_text}", None, now, now, Change.RELAXED)
    held = prev.reason if prev.quota_m is not None else f"no throttle: {what}"
    return replace(prev, reason=held, above_since=None, below_since=None, change=Change.NONE)


def _tightened(prev: Throttle, facts: NodeInput, pool: ColocationPool, alloc: int) -> int:
    floor = floor_m(pool, alloc)
    if facts.source is Source.NONE:  # the watermark: what the threshold leaves BE
        assert facts.ls_usage_m is not None or facts.node_used_m is not None
        ls = facts.ls_usage_m if facts.ls_usage_m is not None else 0
        target = int(alloc * pool.usage_threshold_pct / 100) - ls
        if prev.quota_m is not None:
            target = min(target, prev.quota_m)
        return max(floor, target)
    if prev.quota_m is not None:
        base = prev.quota_m
    elif facts.be_usage_m:
        base = facts.be_usage_m
    else:
        base = alloc - (facts.ls_usage_m or 0)
    return max(floor, min(alloc, int(base * pool.tighten_factor)))


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
    if throttle.quota_m is not None:
        base = throttle.quota_m
    elif facts.be_usage_m:
        base = facts.be_usage_m
    else:
        base = alloc - (facts.ls_usage_m or 0)
    quota = max(floor, int(base * pool.tighten_factor))
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
