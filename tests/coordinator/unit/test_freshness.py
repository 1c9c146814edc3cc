"""Freshness has one owner (:mod:`coordinator.live.freshness`): its verdicts on the
injected clock, and a check over ``coordinator/`` that no other module reads the report
TTL or compares a receipt with the clock."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from coordinator.config import SignalSettings
from coordinator.live.freshness import Freshness, Receipts
from tests.hosts import FakeClock

COORDINATOR = Path(__file__).resolve().parents[3] / "coordinator"
OWNER = COORDINATOR / "live" / "freshness.py"
DEFINED_IN = COORDINATOR / "config.py"
TTL_NAMES = frozenset({"report_ttl_s"})
RECEIPT_NAMES = frozenset({"received_at", "received", "last_received"})
"""What a receipt time is called where one is read (in the owner, and before it was one)."""
CLOCK_NAMES = frozenset({"now", "monotonic"})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def receipts(clock: FakeClock) -> Receipts:
    return Receipts(SignalSettings(report_ttl_s=30.0), clock)


def test_a_node_is_unknown_then_fresh_for_the_ttl_then_stale(
    receipts: Receipts, clock: FakeClock
) -> None:
    unknown = receipts.verdict("a")
    assert (unknown.freshness, unknown.reason, unknown.age_s) == (
        Freshness.UNKNOWN,
        "no report received yet",
        None,
    )
    assert receipts.receive("a", clock.monotonic(), measured_at=123.0)
    clock.advance(30.0)  # exactly the TTL: still fresh
    fresh = receipts.verdict("a")
    assert fresh.fresh and fresh.reason == "report received 30.0s ago (within 30s)"
    assert (fresh.received_at, fresh.measured_at, fresh.age_s) == (1000.0, 123.0, 30.0)
    clock.advance(0.5)
    stale = receipts.verdict("a")
    assert stale.freshness is Freshness.STALE and not stale.fresh
    assert stale.reason == "no report for 30.5s (signals.report_ttl_s 30s)"
    assert receipts.stale_among(["a"], clock.monotonic()) == ["a"]


def test_freshness_goes_by_receipt_not_by_what_the_agent_wrote(
    receipts: Receipts, clock: FakeClock
) -> None:
    receipts.receive("a", clock.monotonic(), measured_at=clock.wall() + 10 * 365 * 86400)
    clock.advance(31.0)
    assert not receipts.verdict("a").fresh
    receipts.receive("b", clock.monotonic(), measured_at=clock.wall() - 3 * 3600)
    assert receipts.verdict("b").fresh


def test_a_report_overtaken_by_a_later_arrival_is_not_noted(
    receipts: Receipts, clock: FakeClock
) -> None:
    first = clock.monotonic()
    clock.advance(5.0)
    assert receipts.receive("a", clock.monotonic(), measured_at=2.0)
    assert not receipts.receive("a", first, measured_at=1.0)
    assert receipts.received_at == {"a": clock.monotonic()}
    assert receipts.measured_at == {"a": 2.0}


def test_stale_among_keeps_the_order_given_and_counts_the_unreported(
    receipts: Receipts, clock: FakeClock
) -> None:
    receipts.receive("old", clock.monotonic(), 0.0)
    clock.advance(40.0)
    receipts.receive("new", clock.monotonic(), 0.0)
    assert receipts.stale_among(["new", "never", "old"], clock.monotonic()) == ["never", "old"]


def test_the_time_since_the_previous_report_is_capped_at_the_ttl(
    receipts: Receipts, clock: FakeClock
) -> None:
    assert receipts.since_previous_s("a", clock.monotonic()) is None
    receipts.receive("a", clock.monotonic(), 0.0)
    assert receipts.since_previous_s("a", clock.monotonic() + 10.0) == 10.0
    assert receipts.since_previous_s("a", clock.monotonic() + 500.0) == 30.0
    assert receipts.since_previous_s("a", clock.monotonic() - 1.0) == 0.0


def test_ages_never_go_negative_and_a_forgotten_node_is_unknown(
    receipts: Receipts, clock: FakeClock
) -> None:
    receipts.receive("a", clock.monotonic() + 2.0, 0.0)  # stamped just after "now"
    assert receipts.age_s("a", clock.monotonic()) == 0.0
    assert receipts.verdict("a").age_s == 0.0
    receipts.forget("a")
    assert receipts.verdict("a").freshness is Freshness.UNKNOWN
    assert receipts.age_s("a", clock.monotonic()) is None


def test_the_expiry_runs_four_times_a_ttl_and_at_least_every_5s(clock: FakeClock) -> None:
    assert Receipts(SignalSettings(report_ttl_s=8.0), clock).expiry_period_s == 2.0
    assert Receipts(SignalSettings(report_ttl_s=600.0), clock).expiry_period_s == 5.0


# ---------------------------------------------------------------- one owner


def _identifier(node: ast.AST) -> str | None:
    """The name a node spells, if it is one (a name, an attribute, an argument)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.arg | ast.keyword):
        return node.arg
    return None


def _mentions(node: ast.AST, names: frozenset[str]) -> bool:
    return any(_identifier(sub) in names for sub in ast.walk(node))


def second_readings(source: str, where: str) -> list[str]:
    """Places in ``source`` that judge freshness themselves: any mention of the report
    TTL, and any comparison or difference of a receipt time with the clock."""
    found = []
    for node in ast.walk(ast.parse(source, where)):
        if _identifier(node) in TTL_NAMES:
            found.append(f"{where}:{getattr(node, 'lineno', 0)} names the report TTL")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
        elif isinstance(node, ast.BinOp):
            sides = [node.left, node.right]
        else:
            continue
        if any(_mentions(s, RECEIPT_NAMES) for s in sides) and any(
            _mentions(s, CLOCK_NAMES) for s in sides
        ):
            found.append(f"{where}:{node.lineno} compares a receipt with the clock")
    return sorted(set(found))


def test_only_the_owner_reads_the_report_ttl_or_times_a_receipt() -> None:
    found = []
    for path in sorted(COORDINATOR.rglob("*.py")):
        if path in (OWNER, DEFINED_IN):
            continue
        found += second_readings(path.read_text(), str(path.relative_to(COORDINATOR)))
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        # The readings this module replaced, as they were.
        "stale = [n for n in self.signals if now - self.received_at[n] > ttl]",
        "ttl = self.settings.signals.report_ttl_s",
        "if now - received > self._ttl_s or math.isnan(full):\n    pass",
        "Colocation(settings.colocation, settings.signals.report_ttl_s, metrics)",
        "def __init__(self, settings, report_ttl_s):\n    pass",
        "age = self.clock.monotonic() - received",
    ],
)
def test_the_check_finds_a_second_reading(source: str) -> None:
    assert second_readings(source, "x.py") != []
