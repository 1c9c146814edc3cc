"""Kubernetes resource quantities, as k8s.io/apimachinery/pkg/api/resource parses them.

Expected values in the tables are worked out by hand; the property tests compare the parser
with an independent model written here with :mod:`decimal`.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Context, Decimal, Inexact, localcontext
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from common.errors import QuantityError
from common.quantity import MAX_MILLI, parse_value

GI = 1024**3

# ------------------------------------------------------------------ example tables

VALUES = [
    ("100m", Fraction(1, 10)),
    ("1.5", Fraction(3, 2)),
    ("32Gi", 34359738368),
    ("1e3", 1000),
    ("500Mi", 524288000),
    ("2k", 2000),
    ("9P", 9 * 10**15),
    ("1Ki", 1024),
    ("1.5Gi", 1610612736),
    ("+.5", Fraction(1, 2)),
    ("5.", 5),
    ("-100m", Fraction(-1, 10)),
    ("0", 0),
    ("-0", 0),
    ("007", 7),
    ("1n", Fraction(1, 10**9)),
    ("1u", Fraction(1, 10**6)),
    ("1M", 10**6),
    ("1G", 10**9),
    ("1T", 10**12),
    ("1P", 10**15),
    ("1Ti", 2**40),
    ("1Pi", 2**50),
    ("8Pi", 2**53),
    ("1E3", 1000),
    ("1e+3", 1000),
    ("2e-3", Fraction(2, 1000)),
    ("1.G", 10**9),
    (".5k", 500),
    ("0.5Ki", 512),
    ("12.345678k", Fraction(12345678, 1000)),
    # Non-zero values are rounded up, away from zero, to a multiple of 1n.
    ("0.0000000001", Fraction(1, 10**9)),
    ("-0.0000000001", Fraction(-1, 10**9)),
    ("1.0000000001", 1 + Fraction(1, 10**9)),
    ("0.1n", Fraction(1, 10**9)),
    ("1e-12", Fraction(1, 10**9)),
    ("1.5n", Fraction(2, 10**9)),
    ("0.000n", 0),
    # The largest magnitude: 2^63-1 milli-units, either sign; rounding up may reach it.
    ("9223372036854775.807", Fraction(2**63 - 1, 1000)),
    ("-9223372036854775.807", -Fraction(2**63 - 1, 1000)),
    ("9223372036854775.8069", Fraction(92233720368547758069, 10**4)),
    ("9223372036854775807m", Fraction(2**63 - 1, 1000)),
    ("9.223372036854775807e15", Fraction(2**63 - 1, 1000)),
    ("1e-1000", Fraction(1, 10**9)),
]


@pytest.mark.parametrize(("text", "expected"), VALUES)
def test_parse_value(text: str, expected: Fraction | int) -> None:
    assert parse_value(text) == expected
    assert isinstance(parse_value(text), Fraction)


OUT_OF_RANGE = [
    "9223372036854775.808",  # one milli-unit past int64
    "-9223372036854775.808",
    "9223372036854775.8071",  # rounds up past it
    "9223372036854775808m",
    "8192Pi",
    "9Pi",
    "1Ei",
    "8Ei",
    "-1Ei",
    "1E",
    "1e16",
    "1e100",
    "1e1000",
    "9999999999999999999999",
    "9223372036854775807",  # int64 units, but not milli-units
]


@pytest.mark.parametrize("text", OUT_OF_RANGE)
def test_out_of_int64_milli_range(text: str) -> None:
    with pytest.raises(QuantityError, match=r"out of range \(at most 9223372036854775807 milli"):
        parse_value(text)


def test_the_bound_is_int64_in_milli_units() -> None:
    assert MAX_MILLI == 9_223_372_036_854_775_807


REJECTED = [
    "",
    " ",
    "1 ",
    " 1",
    "1\n",
    "abc",
    "1.2.3",
    "1Kb",
    "1ki",
    "1KI",
    "1K",
    "1e",
    "1E+",
    "1e-",
    "1e1.5",
    "1e3Ki",
    "1Kie3",
    "--1",
    "+-1",
    "1+",
    "Mi",
    "-",
    "+",
    ".",
    "-.",
    "1.5.Gi",
    "0x10",
    "1_000",
    "1,5",
    "١",  # ARABIC-INDIC DIGIT ONE
    "1e١",
    "１",  # FULLWIDTH DIGIT ONE
    "1mm",
    "1mi",
    "1 Ki",
    "1e1001",
    "1e-1001",
    "1e" + "9" * 5000,  # no giant integer, no ValueError from int()
    "1" * 1001,
    "1" * 5000,
    "0." + "1" * 5000,
    "inf",
    "nan",
    "Infinity",
]


def short_id(text: str) -> str:
    return repr(text) if len(text) <= 20 else f"{text[:6]!r}...{len(text)}chars"


@pytest.mark.parametrize("text", REJECTED, ids=short_id)
def test_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_value(text)


@pytest.mark.parametrize("value", [None, 1, 1.5, b"1", ["1"]])
def test_non_string_rejected(value: object) -> None:
    with pytest.raises(QuantityError, match="string"):
        parse_value(value)  # type: ignore[arg-type]


def test_error_names_the_text() -> None:
    with pytest.raises(QuantityError, match="1Kb"):
        parse_value("1Kb")


def test_leading_zeros_in_exponent_are_not_digits_of_a_giant_integer() -> None:
    assert parse_value("1e-" + "0" * 5000 + "5") == Fraction(1, 10**5)


# ---------------------------------------------------------------- independent model

BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL_SUFFIXES = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}


def model_value(text: str) -> Fraction | None:
    """Value of a grammar-valid quantity, computed with Decimal, not the parser; None when
    its magnitude in milli-units, rounded up, does not fit in int64."""
    m = re.fullmatch(r"([+-]?)([0-9]*\.?[0-9]*)(.*)", text)
    assert m is not None
    sign, number, suffix = m.groups()
    exact = Context(prec=400, Emax=10**6, Emin=-(10**6), traps=[Inexact])
    with localcontext(exact):
        mag = Decimal(number)
        if suffix in BINARY_SUFFIXES:
            mag = mag * Decimal(2 ** BINARY_SUFFIXES[suffix])
        elif suffix in DECIMAL_SUFFIXES:
            mag = mag.scaleb(DECIMAL_SUFFIXES[suffix])
        else:
            mag = mag.scaleb(int(suffix[1:]))
        # Round the magnitude up to a whole number of nano-units.
        nanos = mag.scaleb(9).to_integral_value(rounding=ROUND_CEILING)
        milli = mag.scaleb(3).to_integral_value(rounding=ROUND_CEILING)
    if milli > 9_223_372_036_854_775_807:
        return None
    value = Fraction(int(nanos), 10**9)
    return -value if sign == "-" else value


digits = st.text(alphabet="0123456789", min_size=1, max_size=22)
numbers = st.one_of(
    digits,
    st.builds("{}.{}".format, digits, digits),
    st.builds("{}.".format, digits),
    st.builds(".{}".format, digits),
)
signs = st.sampled_from(["", "+", "-"])
exponents = st.builds(
    "{}{}{}".format,
    st.sampled_from("eE"),
    signs,
    st.integers(0, 999).map(str) | st.text(alphabet="0", min_size=1, max_size=3),
)
suffixes = st.one_of(
    st.sampled_from(sorted(BINARY_SUFFIXES)),
    st.sampled_from(sorted(DECIMAL_SUFFIXES)),
    exponents,
)
quantities = st.builds("{}{}{}".format, signs, numbers, suffixes)


@settings(max_examples=300)
@given(quantities)
@example("1e999")
@example("-9999999999999999999999.9999999999999999999999Ei")
@example("0.0000000000000000000001")
@example("-.0000000000000000000001Ki")
@example("9223372036854775.807")
@example("9223372036854775.8071")
@example("-8191.99999999999999Pi")
def test_grammar_strings_parse_to_model_value(text: str) -> None:
    expected = model_value(text)
    if expected is None:
        with pytest.raises(QuantityError, match="out of range"):
            parse_value(text)
    else:
        assert parse_value(text) == expected


@settings(max_examples=300)
@given(
    st.one_of(
        st.text(),
        st.text(alphabet="0123456789.+-eEiKMGTPnumk _x", max_size=12),
        st.builds("{}{}".format, quantities, st.text(max_size=3)),
    )
)
def test_arbitrary_text_parses_or_raises_quantity_error(text: str) -> None:
    try:
        value = parse_value(text)
    except QuantityError:
        return
    assert isinstance(value, Fraction)
    assert (value * 10**9).denominator == 1
    assert abs(value) * 1000 <= 9_223_372_036_854_775_807
