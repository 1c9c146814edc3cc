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
by the real parser even though the grammar comment allows it) and non-zero values are
rounded *up* (away from zero) to a multiple of 1n. Unlike Go we also reject a bare sign
or a bare dot (``"-"``, ``"."``), which Go silently reads as zero although the grammar
requires a digit, and numbers of more than 1000 digits or with an exponent beyond +-1000.

**Every value fits in int64 milli-units** (:data:`MAX_MILLI`, Go's
``resource.MaxMilliValue`` times 1000): Kubernetes computes with ``MilliValue()``, which
overflows past it, and so would the coordinator's int64 arrays. A larger magnitude
(``"1e100"``, ``"1Ei"`` = 2^60 units = 2^60 * 1000 milli) is a :class:`QuantityError`, so
a hostile amount is turned away where it is read instead of overflowing wherever it is
summed. The largest accepted amount, about 9.2e15 (8 PiB of memory, 9.2 million billion
cores), is far beyond any real node.

Values are exact :class:`fractions.Fraction`, which callers round up once, like
``Quantity.MilliValue()`` / ``Quantity.Value()``, after summing.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

from common.errors import QuantityError

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

# The number part exactly as the grammar states it, then any suffix-looking tail.
_QUANTITY_RE: Final = re.compile(
    r"(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>.*)", re.DOTALL
)
_EXPONENT_RE: Final = re.compile(r"[eE](?P<exp>[+-]?[0-9]+)")
_NANO: Final = Fraction(1, 10**9)
# Go parses the exponent as int32; anything this large is not a resource amount, and
# refusing it early keeps a hostile "1e999999999" from costing a giant integer.
_MAX_ABS_EXPONENT: Final = 1000
# Likewise for the digits of the number; this also keeps int() and str() within Python's
# limit on integer string conversion (4300 digits), which raises a bare ValueError.
_MAX_DIGITS: Final = 1000

MAX_MILLI: Final = 2**63 - 1
"""The largest magnitude of any quantity, in milli-units (int64, as Kubernetes counts)."""


def parse_value(text: str) -> Fraction:
    """The exact value of a quantity string; raise :class:`QuantityError` naming the text
    if it is malformed or beyond :data:`MAX_MILLI` milli-units either way."""
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
        value *= 2 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
    elif (exp_match := _EXPONENT_RE.fullmatch(suffix)) is not None:
        exp_digits = exp_match["exp"].lstrip("+-").lstrip("0") or "0"
        if len(exp_digits) > len(str(_MAX_ABS_EXPONENT)):  # before int(): no giant integers
            raise QuantityError(f"invalid quantity {text!r}: exponent out of range")
        exponent = -int(exp_digits) if exp_match["exp"].startswith("-") else int(exp_digits)
        if abs(exponent) > _MAX_ABS_EXPONENT:
            raise QuantityError(f"invalid quantity {text!r}: exponent out of range")
        value *= Fraction(10) ** exponent
    else:
        raise QuantityError(f"invalid quantity {text!r}: unknown suffix {suffix!r}")
    if value:
        value = Fraction(math.ceil(value / _NANO)) * _NANO  # round up to 1n, as Go does
    if math.ceil(value * 1000) > MAX_MILLI:
        raise QuantityError(
            f"invalid quantity {text!r}: out of range (at most {MAX_MILLI} milli-units,"
            " about 9.2e15)"
        )
    return -value if sign == "-" else value
