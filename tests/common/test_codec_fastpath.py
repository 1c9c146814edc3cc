"""The codec's fast path: it accepts exactly what the path-naming decoders accept, and
builds the same values; decode() uses it and falls back to them to name a bad field."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common import codec
from common.errors import SchemaError
from common.schema import Directives, NodeReport
from tests.common.test_codec import (
    BAD_VALUES,
    make_report,
    make_sparse_report,
    plain_report,
    set_at,
    strategy_for,
)

REFUSED = object()


def fast(tp: Any, data: Any) -> Any:
    try:
        return codec._fast(tp)(copy.deepcopy(data))
    except Exception:
        return REFUSED


def slow(tp: Any, data: Any) -> Any:
    try:
        return codec.from_plain(tp, copy.deepcopy(data))
    except SchemaError:
        return REFUSED


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (3 and 3.0 are equal, not the same)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if hasattr(a, "__dataclass_fields__"):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in plain data a value sits."""
    items = data.items() if isinstance(data, dict) else enumerate(data)
    for key, value in items:
        yield (*prefix, key)
        if isinstance(value, dict | list):
            yield from paths(value, (*prefix, key))


AWKWARD = [
    None, True, False, 0, -1, 1, 7, 2**31, 2**50, 2**50 + 1, 2**63 - 1, -(2**63), 2**64 - 1,
    0.0, -0.0, 0.5, 1.0, 1.5, 100.0, 100.5, 2.0**34, math.nan, math.inf, -math.inf,
    "", "x", "ok", "x" * 254, "x" * 5000, [], [1], [None], [0.5], ["a"], {}, {"a": 1},
    {"absent": ""}, {"absent": "why"}, {"absent": 3}, {"absent": "why", "x": 1}, {1: 2},
]  # fmt: skip
BASES = [plain_report(), msgpack.unpackb(codec.encode(make_sparse_report()))]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(strategy_for(NodeReport))
def test_generated_reports_are_built_the_same(report: NodeReport) -> None:
    data = msgpack.unpackb(codec.encode(report))
    built = fast(NodeReport, data)
    assert built is not REFUSED
    assert same(built, slow(NodeReport, data))
    assert same(built, report)


@settings(max_examples=100, deadline=None)
@given(strategy_for(Directives))
def test_generated_directives_are_built_the_same(directives: Directives) -> None:
    data = msgpack.unpackb(codec.encode(directives))
    assert same(fast(Directives, data), directives)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_reports_are_accepted_by_both_or_by_neither(data: st.DataObject) -> None:
    base = copy.deepcopy(data.draw(st.sampled_from(BASES)))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(paths(base))))
        action = data.draw(st.sampled_from(["replace", "delete", "add"]))
        parent = base
        for step in path[:-1]:
            parent = parent[step]
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[data.draw(st.sampled_from(["extra", "absent", "node", 5]))] = 1
        elif action == "add":
            parent.append(data.draw(st.sampled_from(AWKWARD)))
        else:
            set_at(base, path, copy.deepcopy(data.draw(st.sampled_from(AWKWARD))))

    built, reference = fast(NodeReport, base), slow(NodeReport, base)

    assert (built is REFUSED) == (reference is REFUSED)
    assert same(built, reference)


@pytest.mark.parametrize(("path", "value", "message"), BAD_VALUES)
def test_every_bad_value_is_refused_by_the_fast_path(
    path: tuple[Any, ...], value: Any, message: str
) -> None:
    data = plain_report()
    set_at(data, path, value)
    assert fast(NodeReport, data) is REFUSED


def test_float_fields_given_integers_hold_floats() -> None:
    data = plain_report()
    data["measured_at"] = 1_767_225_600
    data["memfrag"]["zones"][0]["unusable_frac_by_order"] = [0, 1, 0.5]
    report = fast(NodeReport, data)
    assert type(report.measured_at) is float
    assert [type(v) for v in report.memfrag.zones[0].unusable_frac_by_order] == [float] * 3


def test_decode_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    payload = codec.encode(make_report())

    def no_slow_path(tp: Any, data: Any) -> Any:
        raise AssertionError("a valid report went through the path-naming decoders")

    monkeypatch.setattr(codec, "from_plain", no_slow_path)
    assert codec.decode_report(payload) == make_report()


def test_decode_falls_back_to_name_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    data = plain_report()
    data["usage"]["cpu"]["used_pct"] = math.nan
    with pytest.raises(SchemaError, match=r"^usage\.cpu\.used_pct: nan is not a finite number"):
        codec.decode_report(msgpack.packb(data))

    def broken(tp: Any) -> Any:
        def refuse(data: Any) -> Any:
            raise TypeError("a fast path bug")

        return refuse

    monkeypatch.setattr(codec, "_fast", broken)
    assert codec.decode_report(codec.encode(make_report())) == make_report()
