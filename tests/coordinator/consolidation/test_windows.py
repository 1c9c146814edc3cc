"""Rolling usage windows: means, peaks and coverage from fixed buckets, forgetting what
fell out of the window, at a size that does not grow with time."""

from __future__ import annotations

import math

from coordinator.consolidation.windows import BY_NAME, WINDOWS, NodeWindows, Window

FIVE_MIN = BY_NAME["5m"]  # 10 buckets of 30 s
HOUR = BY_NAME["1h"]  # 12 buckets of 5 min


def test_the_windows_are_five_minutes_an_hour_and_a_day() -> None:
    assert [(w.name, w.span_s) for w in WINDOWS] == [("5m", 300.0), ("1h", 3600.0), ("1d", 86400.0)]


def test_mean_peak_and_coverage_of_the_samples_in_the_window() -> None:
    w = NodeWindows()
    for at, pct in ((0.0, 10.0), (10.0, 30.0), (40.0, 50.0)):  # two buckets of 30 s
        w.observe(at, pct)
    s = w.summary(FIVE_MIN, now=50.0)
    assert (s.mean_pct, s.peak_pct, s.coverage) == (30.0, 50.0, 0.2)
    hour = w.summary(HOUR, now=50.0)
    assert (hour.mean_pct, hour.peak_pct) == (30.0, 50.0)
    assert hour.coverage == 1 / 12


def test_samples_older_than_the_window_are_forgotten() -> None:
    w = NodeWindows()
    w.observe(0.0, 90.0)
    for k in range(10):  # 300 s later the first bucket's slot is reused, then passed
        w.observe(300.0 + 30.0 * k, 20.0)
    s = w.summary(FIVE_MIN, now=570.0)
    assert (s.mean_pct, s.peak_pct, s.coverage) == (20.0, 20.0, 1.0)
    # The hour still has the old sample: 90 once and 20 ten times.
    assert w.summary(HOUR, now=570.0).mean_pct == (90.0 + 200.0) / 11
    # Nothing new for six minutes: the 5-minute window is empty, not stale.
    empty = w.summary(FIVE_MIN, now=570.0 + 360.0)
    assert math.isnan(empty.mean_pct) and empty.coverage == 0.0


def test_the_heat_row_is_oldest_first_with_gaps_unsampled() -> None:
    w = NodeWindows([Window("2m", 30.0, 4)])
    window = Window("2m", 30.0, 4)
    w.observe(0.0, 40.0)
    w.observe(70.0, 10.0)
    w.observe(80.0, 30.0)
    row = w.heat(window, now=100.0)
    assert row[0] == 40.0 and math.isnan(row[1]) and row[2] == 20.0 and math.isnan(row[3])
    # A lap later the first bucket's slot holds an old span: unsampled, not 40.
    later = w.heat(window, now=130.0)
    assert math.isnan(later[0]) and later[1] == 20.0 and math.isnan(later[2])
    assert math.isnan(later[3])


def test_a_day_of_samples_takes_no_more_room_than_one() -> None:
    one, day = NodeWindows(), NodeWindows()
    one.observe(0.0, 50.0)
    for k in range(2880):
        day.observe(30.0 * k, 50.0)
    assert sum(r.nbytes for r in day._rings.values()) == sum(r.nbytes for r in one._rings.values())
    assert day.summary(BY_NAME["1d"], now=30.0 * 2879).coverage == 1.0
