"""Kubernetes resource quantities, as k8s.io/apimachinery/pkg/api/resource parses and prints them.

Expected values in the tables are worked out by hand; the property tests compare the parser
with an independent model written here with :mod:`decimal`.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Context, Decimal, Inexact, localcontext
from fractions import Fraction

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from common.errors import QuantityError
from common.quantity import (
    Format,
    Quantity,
    format_quantity,
    parse,
    parse_value,
    to_milli,
    to_units,
)

GI = 1024**3

# ------------------------------------------------------------------ example tables

VALUES = [
    ("100m", Fraction(1, 10)),
    ("1.5", Fraction(3, 2)),
    ("32Gi", 34359738368),
    ("1e3", 1000),
    ("500Mi", 524288000),
    ("2k", 2000),
    ("1E", 10**18),
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
    ("1Ei", 2**60),
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
    # BinarySI magnitudes are capped at 2^63-1, the sign kept.
    ("8Ei", 2**63 - 1),
    ("-8Ei", -(2**63 - 1)),
    ("9223372036854775807", 2**63 - 1),
    ("9223372036854775808", 2**63),  # DecimalSI is not capped
    ("1e1000", 10**1000),
]


@pytest.mark.parametrize(("text", "expected"), VALUES)
def test_parse_value(text: str, expected: Fraction | int) -> None:
    assert parse(text).value == expected
    assert parse_value(text) == expected
    assert isinstance(parse_value(text), Fraction)


CANONICAL = [
    ("100m", "100m"),
    ("0.1", "100m"),
    ("1.5", "1500m"),
    ("1000", "1k"),
    ("1e3", "1e3"),
    ("1E3", "1e3"),
    ("1e4", "10e3"),
    ("1e5", "100e3"),
    ("1e6", "1e6"),
    ("1000e0", "1e3"),
    ("1.5e3", "1500"),
    ("1e-3", "1e-3"),
    ("1e-4", "100e-6"),
    ("1024", "1024"),
    ("1Ki", "1Ki"),
    ("1024Ki", "1Mi"),
    ("0.5Ki", "512"),
    ("1.5Gi", "1536Mi"),
    ("1.5Ki", "1536"),
    ("1023", "1023"),
    ("1025Ki", "1025Ki"),
    ("1.0009765625Ki", "1025"),  # 1025 is BinarySI but not a multiple of 1024
    ("1.00048828125Ki", "1024500m"),  # 1024.5: not an integer, written as DecimalSI
    ("0.0005Ki", "512m"),
    ("8Ei", "9223372036854775807"),
    ("-1Ki", "-1Ki"),
    ("-1024", "-1024"),
    ("-100m", "-100m"),
    ("+1", "1"),
    ("+1k", "1k"),
    ("2000", "2k"),
    ("2000000", "2M"),
    ("32Gi", "32Gi"),
    ("500Mi", "500Mi"),
    ("2k", "2k"),
    ("1E", "1E"),
    ("1000E", "1000E"),  # no suffix above E: the mantissa grows instead
    ("1500m", "1500m"),
    ("1.5k", "1500"),
    ("1.500", "1500m"),
    ("1n", "1n"),
    ("1000n", "1u"),
    ("1u", "1u"),
    ("0.0000000001", "1n"),
    ("0", "0"),
    ("0Ki", "0"),
    ("0e5", "0"),
    ("-0", "0"),
    ("5.", "5"),
    ("+.5", "500m"),
    ("12.345678k", "12345678m"),
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL)
def test_canonical_form(text: str, canonical: str) -> None:
    q = parse(text)
    assert format_quantity(q.value, q.format) == canonical
    assert str(q) == canonical


FORMATS = [
    ("1", Format.DECIMAL_SI),
    ("1m", Format.DECIMAL_SI),
    ("1k", Format.DECIMAL_SI),
    ("1E", Format.DECIMAL_SI),
    ("1Ki", Format.BINARY_SI),
    ("0.5Ki", Format.BINARY_SI),
    ("1e3", Format.DECIMAL_EXPONENT),
    ("1E3", Format.DECIMAL_EXPONENT),
    ("1e0", Format.DECIMAL_EXPONENT),
    # Go keeps a BinarySI amount strictly between 0 and 1 as DecimalSI.
    ("0.0005Ki", Format.DECIMAL_SI),
    ("-0.0005Ki", Format.DECIMAL_SI),
    ("0Ki", Format.BINARY_SI),
]


@pytest.mark.parametrize(("text", "fmt"), FORMATS)
def test_parse_format(text: str, fmt: Format) -> None:
    assert parse(text).format is fmt


@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("100m", 100, 1),
        ("1.5", 1500, 2),
        ("0.0001", 1, 1),  # both round up
        ("1.1", 1100, 2),
        ("1n", 1, 1),
        ("32Gi", 34359738368000, 34359738368),
        ("2", 2000, 2),
        ("0", 0, 0),
        ("1001m", 1001, 2),
        ("1000m", 1000, 1),
    ],
)
def test_to_milli_and_to_units_round_up(text: str, milli: int, units: int) -> None:
    assert to_milli(text) == milli
    assert to_units(text) == units


def test_to_milli_and_to_units_examples_from_brief() -> None:
    assert to_milli("0.0001") == 1
    assert to_units("1.1") == 2


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
        parse(text)


@pytest.mark.parametrize("value", [None, 1, 1.5, b"1", ["1"]])
def test_non_string_rejected(value: object) -> None:
    with pytest.raises(QuantityError, match="string"):
        parse(value)  # type: ignore[arg-type]


def test_error_names_the_text() -> None:
    with pytest.raises(QuantityError, match="1Kb"):
        parse("1Kb")


def test_leading_zeros_in_exponent_are_not_digits_of_a_giant_integer() -> None:
    assert parse("1e-" + "0" * 5000 + "5").value == Fraction(1, 10**5)


def test_quantity_str_and_equality() -> None:
    assert parse("1.5Gi") == Quantity(Fraction(1610612736), Format.BINARY_SI)
    assert str(Quantity(Fraction(1, 10), Format.DECIMAL_SI)) == "100m"


@pytest.mark.parametrize(
    ("value", "fmt", "expected"),
    [
        (0, Format.BINARY_SI, "0"),
        (1, Format.DECIMAL_SI, "1"),
        (Fraction(1, 2), Format.BINARY_SI, "500m"),
        (2048, Format.BINARY_SI, "2Ki"),
        (-2048, Format.BINARY_SI, "-2Ki"),
        (1023, Format.BINARY_SI, "1023"),
        (3 * 2**60, Format.BINARY_SI, "3Ei"),
        (10**21, Format.DECIMAL_SI, "1000E"),
        (10**21, Format.DECIMAL_EXPONENT, "1e21"),
        (Fraction(-3, 10**9), Format.DECIMAL_EXPONENT, "-3e-9"),
        (Fraction(1, 100), Format.DECIMAL_SI, "10m"),
    ],
)
def test_format_quantity(value: Fraction | int, fmt: Format, expected: str) -> None:
    assert format_quantity(value, fmt) == expected


def test_format_quantity_default_is_decimal_si() -> None:
    assert format_quantity(1024) == "1024"
    assert format_quantity(Fraction(3, 2)) == "1500m"


@pytest.mark.parametrize("value", [Fraction(1, 3), Fraction(1, 10**10), Fraction(3, 2 * 10**9)])
def test_format_quantity_refuses_values_finer_than_nano(value: Fraction) -> None:
    with pytest.raises(QuantityError):
        format_quantity(value)


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
MAX_INT64 = 2**63 - 1


def model_value(text: str) -> tuple[Fraction, Format]:
    """Value and format of a grammar-valid quantity, computed with Decimal, not the parser."""
    m = re.fullmatch(r"([+-]?)([0-9]*\.?[0-9]*)(.*)", text)
    assert m is not None
    sign, number, suffix = m.groups()
    exact = Context(prec=400, Emax=10**6, Emin=-(10**6), traps=[Inexact])
    with localcontext(exact):
        mag = Decimal(number)
        if suffix in BINARY_SUFFIXES:
            fmt = Format.BINARY_SI
            mag = mag * Decimal(2 ** BINARY_SUFFIXES[suffix])
        elif suffix in DECIMAL_SUFFIXES:
            fmt = Format.DECIMAL_SI
            mag = mag.scaleb(DECIMAL_SUFFIXES[suffix])
        else:
            fmt = Format.DECIMAL_EXPONENT
            mag = mag.scaleb(int(suffix[1:]))
        # Round the magnitude up to a whole number of nano-units.
        nanos = mag.scaleb(9).to_integral_value(rounding=ROUND_CEILING)
        value = Fraction(int(nanos), 10**9)
    if fmt is Format.BINARY_SI:
        value = min(value, Fraction(MAX_INT64))
        if 0 < value < 1:
            fmt = Format.DECIMAL_SI
    return (-value if sign == "-" else value), fmt


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
def test_grammar_strings_parse_to_model_value(text: str) -> None:
    assert parse(text) == Quantity(*model_value(text))


# Canonical strings: an optional '-', an integer mantissa without leading zeros, one suffix.
CANONICAL_RE = re.compile(
    r"(?P<sign>-?)(?P<mantissa>0|[1-9][0-9]*)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|e-?[1-9][0-9]*|)"
)


def assert_canonical_shape(text: str, fmt: Format) -> None:
    m = CANONICAL_RE.fullmatch(text)
    assert m is not None, text
    mantissa, suffix = int(m["mantissa"]), m["suffix"]
    if mantissa == 0:
        assert text == "0"
        return
    if suffix in BINARY_SUFFIXES:
        assert fmt is Format.BINARY_SI
        assert mantissa % 1024 != 0 or suffix == "Ei"
    elif suffix.startswith("e"):
        assert fmt is Format.DECIMAL_EXPONENT
        assert int(suffix[1:]) % 3 == 0
        assert mantissa % 1000 != 0
    elif suffix == "" and fmt is Format.BINARY_SI:
        assert mantissa % 1024 != 0
    elif suffix == "" and fmt is Format.DECIMAL_EXPONENT:
        assert mantissa % 1000 != 0
    else:  # a decimal suffix, or none for DecimalSI
        assert fmt is not Format.DECIMAL_EXPONENT
        assert mantissa % 1000 != 0 or suffix == "E"


@settings(max_examples=300)
@given(quantities)
@example("1000E")
@example("1024Ei")
@example("1.5Gi")
@example("+1e3")
@example("2.9296875Ki")
def test_canonical_round_trip_and_shape(text: str) -> None:
    q = parse(text)
    canonical = format_quantity(q.value, q.format)
    assert "." not in canonical
    assert not canonical.startswith("+")
    assert_canonical_shape(canonical, q.format)
    again = parse(canonical)
    assert again.value == q.value
    # Idempotent: the canonical string reads back as itself, except that a BinarySI amount
    # written without a binary suffix (3000 = 2.9296875Ki prints "3000") reads back as
    # DecimalSI and is then written as such ("3k"), exactly as in Go.
    expected_fmt = q.format
    if q.format is Format.BINARY_SI and not canonical.endswith("i"):
        expected_fmt = Format.DECIMAL_SI
    assert str(again) == format_quantity(q.value, expected_fmt)
    assert str(parse(str(again))) == str(again)


@settings(max_examples=200)
@given(
    st.integers(-(10**30), 10**30),
    st.integers(0, 9),
    st.sampled_from(list(Format)),
)
def test_format_then_parse_returns_the_value(nanos: int, shift: int, fmt: Format) -> None:
    value = Fraction(nanos * 10**shift, 10**9)
    text = format_quantity(value, fmt)
    assume(fmt is not Format.BINARY_SI or abs(value) <= MAX_INT64)  # parsing caps BinarySI
    assert parse(text).value == value
    assert_canonical_shape(text, fmt)


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
        q = parse(text)
    except QuantityError:
        return
    assert isinstance(q.value, Fraction)
    assert (q.value * 10**9).denominator == 1
