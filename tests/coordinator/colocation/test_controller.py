"""The BE throttle on recorded pressure time series: dwell before tightening, no flapping
under noise, bounded steps, the floor, release when stale, the usage-watermark fallback."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coordinator.colocation.controller import (
    RELEASED,
    Change,
    Throttle,
    floor_m,
    local_bounds,
    reclaimable_m,
    step,
)
from coordinator.colocation.inputs import NodeInput, Source
from coordinator.config import ColocationPool, ColocationSettings

POOL = ColocationPool()  # high 30 %, low 10 %, tighten after 10 s, relax after 30 s
ALLOC = 16_000
FLOOR = 1_600  # 10 % of 16 cores
STEP_M = 1_600  # relax_step_pct 10 % of 16 cores
INTERVAL_S = 5.0

# Recorded "some avg10" of the LS pods of a 16-core node (percent, one sample per 5 s).
# A batch job starts at t=20 s and saturates the node until it is throttled.
ONSET = [2.1, 3.4, 2.8, 3.0, 18.5, 34.2, 41.7, 46.0, 47.3, 44.1, 39.8, 36.5]
# A node running near its limit: LS stall jitters around the 30 % threshold for ten minutes.
NOISY_HIGH = [27.4, 31.2, 29.8, 33.5, 28.1, 30.6, 26.9, 32.8, 29.1, 31.7, 28.8, 34.0] * 10
# After a throttle: stall jitters around the 10 % low threshold.
NOISY_LOW = [8.7, 11.3, 9.2, 12.6, 9.9, 10.4, 7.8, 13.1, 9.5, 11.8, 8.2, 10.9] * 10
# Sustained heavy pressure with noise, never dipping below the high threshold.
HEAVY = [44.0, 51.3, 38.6, 47.9, 55.2, 41.4, 36.8, 49.5, 58.1, 43.2, 39.9, 52.7] * 3
# Pressure gone: the batch job is throttled and LS recovers.
CALM = [3.2, 2.7, 1.9, 2.4, 3.8, 2.2] * 60


def facts(pressure: float | None, **changes: object) -> NodeInput:
    base = NodeInput(
        pressure_pct=pressure,
        source=Source.LS_PODS if pressure is not None else Source.NONE,
        allocatable_m=ALLOC,
        node_used_m=14_000,
        ls_usage_m=8_000,
        be_usage_m=6_000,
        be_pods=("be-1", "be-2"),
        ls_pods=3,
        enforcement=None,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def run(
    series: list[float],
    start: Throttle = RELEASED,
    t0: float = 1000.0,
    pool: ColocationPool = POOL,
    **changes: object,
) -> list[Throttle]:
    """The throttle after each sample of ``series``, one sample every 5 s."""
    out, throttle = [], start
    for k, value in enumerate(series):
        throttle = step(throttle, facts(value, **changes), pool, t0 + k * INTERVAL_S)
        out.append(throttle)
    return out


def changes_of(throttles: list[Throttle]) -> list[tuple[int, Change, int | None]]:
    return [
        (k, t.change, t.quota_m) for k, t in enumerate(throttles) if t.change is not Change.NONE
    ]


def test_the_floor_is_a_share_of_allocatable_or_the_minimum() -> None:
    assert floor_m(POOL, ALLOC) == 1_600
    assert floor_m(POOL, 2_000) == 500


def test_onset_tightens_only_after_the_dwell_then_halves_be_use() -> None:
    throttles = run(ONSET)
    # High from sample 5 (t=25 s); 10 s later (sample 7) BE goes to half its use of 6000 m.
    assert changes_of(throttles) == [(7, Change.TIGHTENED, 3_000), (9, Change.TIGHTENED, 1_600)]
    assert throttles[7].reason == "tightened: LS cpu some avg10 46.0% >= 30% for 10s"
    assert throttles[6].quota_m is None  # 5 s of pressure: nothing yet
    assert throttles[6].reason == "no throttle yet: LS cpu some avg10 41.7% >= 30% for 10s"


def test_a_single_spike_does_nothing() -> None:
    assert changes_of(run([3.0, 3.5, 88.0, 4.0, 3.1, 2.9])) == []


def test_noise_around_the_high_threshold_never_flaps() -> None:
    assert changes_of(run(NOISY_HIGH)) == []


def test_noise_around_the_low_threshold_never_relaxes_or_flaps() -> None:
    throttled = Throttle(quota_m=3_000, reason="tightened: …", changed_at=990.0)
    throttles = run(NOISY_LOW, start=throttled)
    assert changes_of(throttles) == []
    assert {t.quota_m for t in throttles} == {3_000}


def test_noise_between_the_thresholds_holds() -> None:
    throttled = Throttle(quota_m=2_000, reason="tightened: x", changed_at=990.0)
    throttles = run([15.0, 22.0, 28.0, 12.0, 19.0] * 20, start=throttled)
    assert changes_of(throttles) == []
    assert throttles[-1].reason == "tightened: x"


def test_sustained_pressure_tightens_at_most_once_a_dwell_down_to_the_floor() -> None:
    throttles = run(HEAVY)
    found = changes_of(throttles)
    assert found == [(2, Change.TIGHTENED, 3_000), (4, Change.TIGHTENED, 1_600)]
    gaps = [b[0] - a[0] for a, b in zip(found, found[1:], strict=False)]
    assert all(g * INTERVAL_S >= POOL.tighten_after_s for g in gaps)
    assert min(t.quota_m for t in throttles if t.quota_m is not None) == FLOOR


def test_relaxing_goes_in_bounded_steps_each_after_the_dwell_then_releases() -> None:
    at_floor = Throttle(quota_m=FLOOR, reason="tightened", changed_at=995.0)
    throttles = run(CALM, start=at_floor)
    found = changes_of(throttles)
    quotas = [FLOOR] + [q for _, _, q in found]
    steps = [b - a for a, b in zip(quotas, quotas[1:-1], strict=False)]
    assert steps and all(s == STEP_M for s in steps)
    assert [c for _, c, _ in found[:-1]] == [Change.RELAXED] * len(steps)
    assert found[-1][1:] == (Change.RELEASED, None)  # 1600 + 9 × 1600 reaches 16000
    assert len(found) == 9
    indices = [k for k, _, _ in found]
    assert indices[0] * INTERVAL_S >= POOL.relax_after_s
    assert all(
        (b - a) * INTERVAL_S >= POOL.relax_after_s
        for a, b in zip(indices, indices[1:], strict=False)
    )
    assert throttles[found[-1][0]].reason == ("released: LS cpu some avg10 3.2% <= 10% for 30s")
    assert throttles[-1].reason == "no throttle: LS cpu some avg10 2.2%"


def test_pressure_during_a_relax_dwell_restarts_it() -> None:
    at_floor = Throttle(quota_m=FLOOR, reason="tightened", changed_at=995.0)
    series = [3.0] * 5 + [20.0] + [3.0] * 7  # 25 s calm, one sample in the band, 30 s calm
    throttles = run(series, start=at_floor)
    assert changes_of(throttles) == [(12, Change.RELAXED, FLOOR + STEP_M)]


def test_a_stale_node_is_released_at_once() -> None:
    throttled = Throttle(quota_m=3_000, reason="tightened", changed_at=900.0)
    released = step(throttled, None, POOL, 1000.0)
    assert (released.quota_m, released.change) == (None, Change.RELEASED)
    assert released.reason == "no fresh report: released"
    again = step(released, None, POOL, 1005.0)
    assert (again.quota_m, again.change, again.changed_at) == (None, Change.NONE, 1000.0)


@pytest.mark.parametrize(
    ("pool", "changes", "reason"),
    [
        (replace(POOL, enabled=False), {}, "colocation off in pool default"),
        (POOL, {"allocatable_m": None}, "allocatable CPU unknown: released"),
        (POOL, {"be_pods": ()}, "no best-effort pods on the node"),
        (
            POOL,
            {"source": Source.NONE, "pressure_pct": None, "node_used_m": None},
            "neither PSI nor CPU use reported: released",
        ),
    ],
)
def test_nothing_to_act_on_releases(
    pool: ColocationPool, changes: dict[str, object], reason: str
) -> None:
    throttled = Throttle(quota_m=3_000, reason="tightened", changed_at=900.0)
    released = step(throttled, facts(50.0, **changes), pool, 1000.0)
    assert (released.quota_m, released.change, released.reason) == (None, Change.RELEASED, reason)


def test_node_psi_stands_in_and_says_so() -> None:
    throttles = run([40.0, 40.0, 40.0], source=Source.NODE)
    assert throttles[2].quota_m == 3_000
    assert throttles[2].reason.endswith("(node PSI)")


def test_without_psi_the_usage_watermark_decides() -> None:
    # 14000 of 16000 m used (87.5 % >= 65 %): after 10 s BE gets 65 % × 16000 − 8000 LS.
    throttles = run([None, None, None, None])  # type: ignore[list-item]
    assert changes_of(throttles) == [(2, Change.TIGHTENED, 2_400)]
    assert throttles[2].reason == "tightened: node CPU use 87.5% >= 65% for 10s (no PSI)"
    # LS grows: the watermark leaves BE less, never below the floor.
    later = run([None] * 3, start=throttles[-1], t0=1100.0, ls_usage_m=9_800)  # type: ignore[list-item]
    assert [t.quota_m for t in later][-1] == FLOOR
    # Use falls to 50 % (<= 55 %): relaxed by a bounded step after 30 s.
    calm = run([None] * 7, start=later[-1], t0=1200.0, node_used_m=8_000)  # type: ignore[list-item]
    assert changes_of(calm) == [(6, Change.RELAXED, FLOOR + STEP_M)]


def test_local_bounds_stay_between_the_floor_and_the_current_quota() -> None:
    bounds = local_bounds(RELEASED, facts(5.0), POOL)
    assert bounds is not None
    assert (bounds.pressure_high_pct, bounds.window_s, bounds.hold_s) == (30.0, 1.0, 20.0)
    assert bounds.quota_m == 3_000  # half of BE's 6000 m use
    throttled = Throttle(quota_m=2_000, reason="t", changed_at=1.0)
    bounds = local_bounds(throttled, facts(5.0), POOL)
    assert bounds is not None and bounds.quota_m == FLOOR  # half of 2000 is under the floor
    low_floor = replace(POOL, floor_pct=1.0, floor_min_m=100)
    bounds = local_bounds(Throttle(quota_m=150, reason="t"), facts(5.0), low_floor)
    assert bounds is not None and bounds.quota_m == 150  # never above the current quota


@pytest.mark.parametrize(
    ("pool", "changes"),
    [
        (POOL, {"source": Source.NODE}),  # the agent watches the LS pods, not the node
        (replace(POOL, local=False), {}),
        (replace(POOL, enabled=False), {}),
        (POOL, {"allocatable_m": None}),
    ],
)
def test_no_local_bounds_where_the_agent_cannot_or_may_not_act(
    pool: ColocationPool, changes: dict[str, object]
) -> None:
    assert local_bounds(RELEASED, facts(5.0, **changes), pool) is None
    assert local_bounds(RELEASED, None, POOL) is None


def test_reclaimable_batch_capacity() -> None:
    # 16000 allocatable − 8000 LS − 10 % margin.
    assert reclaimable_m(facts(5.0), POOL) == 6_400
    assert reclaimable_m(facts(5.0, ls_usage_m=15_900), POOL) == 0
    assert reclaimable_m(facts(5.0, ls_usage_m=None), POOL) is None
    assert reclaimable_m(None, POOL) is None


def test_the_first_matching_pool_wins() -> None:
    gpu = ColocationPool(name="gpu", selector={"pool": "gpu"}, pressure_high_pct=15.0)
    gpu_a100 = ColocationPool(name="a100", selector={"pool": "gpu", "model": "a100"})
    settings = ColocationSettings(pools=(gpu, gpu_a100))
    assert settings.pool_of({"pool": "gpu", "model": "a100"}).name == "gpu"
    assert settings.pool_of({"pool": "cpu"}).name == "default"
    assert ColocationSettings(pools=(gpu_a100, gpu)).pool_of({"pool": "gpu"}).name == "gpu"


def test_katalysts_threshold_tightens_earlier() -> None:
    katalyst = replace(POOL, pressure_high_pct=15.0)
    assert changes_of(run(ONSET, pool=katalyst))[0][0] == 6
    assert changes_of(run(ONSET))[0][0] == 7


def test_the_watermark_never_loosens_a_throttle_while_use_is_high() -> None:
    # LS use fell (the watermark would leave BE 8400 m) but the node is still above it:
    # only relaxing, after its dwell and by its step, loosens.
    throttled = Throttle(quota_m=2_000, reason="tightened", changed_at=900.0)
    throttles = run([None] * 4, start=throttled, ls_usage_m=2_000)  # type: ignore[list-item]
    assert {t.quota_m for t in throttles} == {2_000}
    assert changes_of(throttles) == []


# The agent's per-pod rate: the measured stall share over the whole interval since its
# previous sample, which the dwell may count as already held.
RATE_INTERVAL_S = 10.0


def rate_run(
    series: list[float], covered_s: float, interval_s: float = RATE_INTERVAL_S
) -> list[Throttle]:
    """The throttle after each rate sample of ``series``, one every ``interval_s``, each
    said to cover ``covered_s``."""
    out, throttle = [], RELEASED
    for k, value in enumerate(series):
        now = 1000.0 + k * interval_s
        throttle = step(throttle, facts(value, pressure_rate=True), POOL, now, covered_s)
        out.append(throttle)
    return out


def test_a_rate_high_over_a_whole_dwell_tightens_on_that_report() -> None:
    throttles = rate_run([3.0, 47.5, 44.0], covered_s=10.0)
    # Then, as ever, sustained pressure tightens again after another full dwell.
    assert changes_of(throttles) == [(1, Change.TIGHTENED, 3_000), (2, Change.TIGHTENED, 1_600)]
    assert throttles[1].reason == "tightened: LS cpu some 47.5% over the last 10s >= 30% for 10s"
    assert throttles[1].above_since == 1010.0  # the dwell restarts after tightening


def test_a_rate_high_over_less_than_the_dwell_still_waits() -> None:
    throttles = rate_run([3.0, 47.5, 44.0, 41.0], covered_s=4.0, interval_s=4.0)
    # High from the interval ending at 1004 s, so since 1000 s: 10 s are reached at 1012 s.
    assert changes_of(throttles) == [(3, Change.TIGHTENED, 3_000)]
    assert throttles[1].quota_m is None
    assert throttles[1].above_since == 1000.0
    assert throttles[1].reason == (
        "no throttle yet: LS cpu some 47.5% over the last 4s >= 30% for 10s"
    )


@pytest.mark.parametrize(
    ("covered_s", "said"),
    [(0.1, "0.1s"), (0.25, "0.25s"), (4.0, "4s"), (9.4, "9.4s")],
)
def test_a_reason_says_the_span_a_rate_covers_sub_second_too(covered_s: float, said: str) -> None:
    throttle = step(RELEASED, facts(47.5, pressure_rate=True), POOL, 1000.0, covered_s)
    assert throttle.reason == (
        f"no throttle yet: LS cpu some 47.5% over the last {said} >= 30% for 10s"
    )


def test_a_rate_without_a_known_interval_counts_from_now() -> None:
    throttles = rate_run([47.5, 44.0], covered_s=0.0)
    assert changes_of(throttles) == [(1, Change.TIGHTENED, 3_000)]
    assert throttles[0].reason == (
        "no throttle yet: LS cpu some 47.5% since the previous sample >= 30% for 10s"
    )


@pytest.mark.parametrize("source", [Source.LS_PODS, Source.NODE, Source.NONE])
def test_an_avg10_or_watermark_figure_ignores_the_interval(source: Source) -> None:
    # An avg10 proves nothing about the time before it was read, whatever the interval.
    high = 95.0 if source is Source.NONE else 47.5
    figure = facts(high, source=source, node_used_m=15_500)
    first = step(RELEASED, figure, POOL, 1000.0, 10.0)
    assert (first.quota_m, first.above_since) == (None, 1000.0)
    later = step(first, figure, POOL, 1010.0, 10.0)
    assert later.change is Change.TIGHTENED


def test_rate_noise_around_the_high_threshold_never_flaps() -> None:
    # Short intervals: no single one covers a dwell, and every dip restarts it.
    assert changes_of(rate_run(NOISY_HIGH, covered_s=5.0, interval_s=5.0)) == []
    # Whole-dwell intervals: each one above is a proven 10 s of stall, and tightens; none
    # is ever at the low threshold, so nothing relaxes: the quota only goes down.
    throttles = rate_run(NOISY_HIGH, covered_s=10.0)
    assert {change for _, change, _ in changes_of(throttles)} == {Change.TIGHTENED}
    quotas = [t.quota_m for t in throttles if t.quota_m is not None]
    assert quotas == sorted(quotas, reverse=True)


def test_a_rate_never_brings_relaxing_forward() -> None:
    throttled = Throttle(quota_m=3_000, reason="tightened: x", changed_at=990.0)
    throttle = step(throttled, facts(2.0, pressure_rate=True), POOL, 1000.0, 30.0)
    assert (throttle.quota_m, throttle.below_since) == (3_000, 1000.0)
