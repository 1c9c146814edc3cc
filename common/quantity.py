"""Kubernetes resource quantities: ``"100m"``, ``"1.5"``, ``"32Gi"``, ``"1e3"``, ``"2k"``.

Parsing follows ``k8s.io/apimachinery/pkg/api/resource`` exactly:

    <quantity>        ::= <signedNumber><suffix>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= m | "" | k | M | G | T | P | E     (Go's table also has n and u)
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
    <signedNumber>    ::= <sign><number>
    <sign>            ::= "+" | "-" | ""
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>

As in Go, the exponent of ``<decimalExponent>`` must be an integer (``1e1.5`` is rejected
by the real parser even though the grammar comment allows it), non-zero values are
rounded *up* (away from zero) to a multiple of 1n, and BinarySI values are capped at
2^63-1. Unlike Go we also reject a bare sign or a bare dot (``"-"``, ``"."``), which Go
silently reads as zero although the grammar requires a digit, and numbers of more than
1000 digits or with an exponent beyond +-1000, which are no resource amount.

Values are exact :class:`fractions.Fraction`; :func:`to_milli` and :func:`to_units` round
up like ``Quantity.MilliValue()`` / ``Quantity.Value()``. :func:`format_quantity` writes
the canonical form ``Quantity.String()`` would write.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from common.errors import QuantityError


class Format(enum.Enum):
    """Which suffix family a quantity was written in; canonical output keeps it."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final = {
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
_DECIMAL_BY_EXP: Final = {v: k for k, v in _DECIMAL.items()}

# The number part exactly as the grammar states it, then any suffix-looking tail.
_QUANTITY_RE: Final = re.compile(
    r"(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>.*)", re.DOTALL
)
_EXPONENT_RE: Final = re.compile(r"[eE](?P<exp>[+-]?[0-9]+)")
_NANO: Final = Fraction(1, 10**9)
_MAX_INT64: Final = 2**63 - 1
# Go parses the exponent as int32; anything this large is not a resource amount, and
# refusing it early keeps a hostile "1e999999999" from costing a giant integer.
_MAX_ABS_EXPONENT: Final = 1000
# Likewise for the digits of the number; this also keeps int() and str() within Python's
# limit on integer string conversion (4300 digits), which raises a bare ValueError.
_MAX_DIGITS: Final = 1000


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity and the format it was written in."""

    value: Fraction
    format: Format

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


def parse(text: str) -> Quantity:
    """Parse a quantity string; raise :class:`QuantityError` naming the text if invalid."""
    if not isinstance(text, str):
        raise QuantityError(f"quantity must be a string, not {type(text).__name__}")
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise QuantityError(f"invalid quantity {text!r}: expected a number with an optional suffix")
    sign, num, suffix = match["sign"], match["num"], match["suffix"]
    whole, _, frac = num.partition(".")
    if len(whole) + len(frac) > _MAX_DIGITS:
        raise QuantityError(f"invalid quantity {text!r}: more than {_MAX_DIGITS} digits")
    value = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
    if suffix in _BINARY:
        fmt, value = Format.BINARY_SI, value * 2 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        fmt, value = Format.DECIMAL_SI, value * Fraction(10) ** _DECIMAL[suffix]
    elif (exp_match := _EXPONENT_RE.fullmatch(suffix)) is not None:
        exp_digits = exp_match["exp"].lstrip("+-").lstrip("0") or "0"
        if len(exp_digits) > len(str(_MAX_ABS_EXPONENT)):  # before int(): no giant integers
            raise QuantityError(f"invalid quantity {text!r}: exponent out of range")
        exponent = -int(exp_digits) if exp_match["exp"].startswith("-") else int(exp_digits)
        if abs(exponent) > _MAX_ABS_EXPONENT:
            raise QuantityError(f"invalid quantity {text!r}: exponent out of range")
        fmt, value = Format.DECIMAL_EXPONENT, value * Fraction(10) ** exponent
    else:
        raise QuantityError(f"invalid quantity {text!r}: unknown suffix {suffix!r}")
    if value:
        value = Fraction(math.ceil(value / _NANO)) * _NANO  # round up to 1n, as Go does
    if fmt is Format.BINARY_SI and value > _MAX_INT64:
        value = Fraction(_MAX_INT64)
    if fmt is Format.BINARY_SI and 0 < value < 1:
        fmt = Format.DECIMAL_SI  # as Go does: a BinarySI amount below 1 is kept as DecimalSI
    return Quantity(-value if sign == "-" else value, fmt)


def parse_value(text: str) -> Fraction:
    """The exact value of a quantity string."""
    return parse(text).value


def to_milli(text: str) -> int:
    """Milli-units rounded up, like ``Quantity.MilliValue()``: ``"1.5"`` -> 1500."""
    return math.ceil(parse(text).value * 1000)


def to_units(text: str) -> int:
    """Whole units rounded up, like ``Quantity.Value()``: ``"32Gi"`` -> 34359738368."""
    return math.ceil(parse(text).value)


def format_quantity(value: Fraction | int, fmt: Format = Format.DECIMAL_SI) -> str:
    """The canonical string ``Quantity.String()`` writes for ``value`` in ``fmt``.

    No precision is lost, no fractional digits are written and the suffix is as large as
    possible. BinarySI falls back to DecimalSI below 1024 or for non-integer values.
    """
    value = Fraction(value)
    if value == 0:
        return "0"
    if (value / _NANO).denominator != 1:
        raise QuantityError(f"{value} is not a multiple of 1n and cannot be written exactly")
    sign = "-" if value < 0 else ""
    mag = abs(value)
    if fmt is Format.BINARY_SI and (mag < 1024 or mag.denominator != 1):
        fmt = Format.DECIMAL_SI
    if fmt is Format.BINARY_SI:
        mantissa, exponent = int(mag), 0
        while mantissa % 1024 == 0 and exponent < 60:
            mantissa //= 1024
            exponent += 10
        suffix = {0: "", **{v: k for k, v in _BINARY.items()}}[exponent]
        return f"{sign}{mantissa}{suffix}"
    # Decimal: express as integer mantissa * 10^exponent with exponent a multiple of 3.
    exponent = 0
    while mag.denominator != 1:
        mag *= 10
        exponent -= 1
    mantissa = int(mag)
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    if exponent > 18:  # beyond the largest suffix: keep "E" and grow the mantissa
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    return f"{sign}{mantissa}{_DECIMAL_BY_EXP[exponent]}"
