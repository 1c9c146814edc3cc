"""Drain budgets: a share rounded up, windows by weekday and UTC time (one opened the day
before may still hold), the most restrictive holding budget, and settings refused with a
message that names what is wrong."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from common.config import build
from common.errors import ConfigError
from coordinator.config import CoordinatorSettings, DrainBudget, DrainSettings
from coordinator.consolidation.budgets import allowed, holds, limit


def at(text: str) -> float:
    """Unix seconds of an ISO time, UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_a_share_is_rounded_up_and_a_count_is_taken_as_is() -> None:
    assert limit(DrainBudget(nodes="10%"), 5) == 1
    assert limit(DrainBudget(nodes="10%"), 20) == 2
    assert limit(DrainBudget(nodes="10%"), 0) == 0
    assert limit(DrainBudget(nodes="3"), 100) == 3


def test_a_window_holds_on_its_days_between_start_and_start_plus_duration() -> None:
    office = DrainBudget(nodes="0", days=("mon", "fri"), start="09:00", duration_h=8)
    assert holds(office, at("2026-12-07T09:00"))  # a Monday
    assert holds(office, at("2026-12-07T16:59"))
    assert not holds(office, at("2026-12-07T17:00"))
    assert not holds(office, at("2026-12-07T08:59"))
    assert not holds(office, at("2026-12-08T10:00"))  # Tuesday
    assert holds(office, at("2026-12-11T10:00"))  # Friday


def test_a_window_opened_the_day_before_still_holds_after_midnight() -> None:
    night = DrainBudget(nodes="5", days=("sun",), start="22:00", duration_h=10)
    assert holds(night, at("2026-12-07T07:59"))  # Monday morning, opened Sunday
    assert not holds(night, at("2026-12-07T08:00"))
    assert not holds(night, at("2026-12-07T23:00"))  # Monday evening: no Monday window


def test_the_most_restrictive_holding_budget_applies_and_none_holding_means_no_limit() -> None:
    office = DrainBudget(nodes="0", start="09:00", duration_h=8)
    settings = DrainSettings(budgets=(DrainBudget(nodes="50%"), office))
    assert allowed(settings, "", 10, at("2026-12-07T10:00")) == 0
    assert allowed(settings, "", 10, at("2026-12-07T20:00")) == 5
    only_office = DrainSettings(budgets=(office,), group_budgets={"gpu": (DrainBudget(nodes="1"),)})
    assert allowed(only_office, "", 10, at("2026-12-07T20:00")) is None
    assert allowed(only_office, "gpu", 10, at("2026-12-07T10:00")) == 1


@pytest.mark.parametrize(
    ("budget", "says"),
    [
        ({"nodes": "ten"}, "nodes: expected a count or a share like 10%, got 'ten'"),
        ({"nodes": "150%"}, "a share is at most 100%"),
        ({"nodes": "1", "start": "09:00"}, "start and duration_h go together"),
        ({"nodes": "1", "start": "9am", "duration_h": 1}, "start: expected HH:MM (UTC)"),
        ({"nodes": "1", "start": "24:00", "duration_h": 1}, "start: expected HH:MM (UTC)"),
        ({"nodes": "1", "days": ["monday"], "start": "09:00", "duration_h": 1}, "days: expected"),
        ({"nodes": "1", "days": ["mon"]}, "days need a start and duration_h"),
        ({"nodes": "1", "start": "09:00", "duration_h": 200}, "duration_h: expected more than 0"),
    ],
)
def test_bad_budgets_are_refused_by_key_path(budget: dict, says: str) -> None:
    with pytest.raises(ConfigError, match="drain.budgets") as raised:
        build(CoordinatorSettings, {"drain": {"budgets": [budget]}})
    assert says in str(raised.value)


@pytest.mark.parametrize(
    ("drain", "says"),
    [
        ({"max_draining": 0}, "drain.max_draining: expected 1..1000"),
        ({"max_level": "critical"}, "drain.max_level: expected low, medium or high"),
        ({"budget": []}, "drain.budget: unknown setting"),
    ],
)
def test_bad_drain_settings_are_refused(drain: dict, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build(CoordinatorSettings, {"drain": drain})
    assert says in str(raised.value)
