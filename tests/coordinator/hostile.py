"""Hypothesis strategies for hostile request bodies: valid-looking objects with one to a
few mutations (deep nesting, huge, negative, NaN or overflowing magnitudes, ragged
arrays, wrong types, huge counts), and plain random bytes.

A mutation walks from the root of a seed object to a random place and replaces,
deletes, repeats or buries what is there. Leaves that are quantities get quantity-shaped
trouble, since those are what the endpoints parse hardest.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Final

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

DEFAULT_EXAMPLES: Final = int(os.environ.get("STOWAGE_FUZZ_EXAMPLES", "120"))
"""Examples per endpoint in the default suite: a couple of seconds each."""
SLOW_EXAMPLES: Final = int(os.environ.get("STOWAGE_FUZZ_SLOW_EXAMPLES", "3000"))
"""Examples per endpoint in the opt-in run (``-m slow``)."""

FUZZ = settings(
    max_examples=DEFAULT_EXAMPLES,
    deadline=None,  # one HTTP round trip each, on a machine that may be busy
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one app and cluster serve every example
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
FUZZ_SLOW = settings(FUZZ, max_examples=SLOW_EXAMPLES)

QUANTITIES: Final = (
    "1e100",
    "1Ei",
    "8Ei",
    "9999999999999999999999",
    "9223372036854775807",
    "9223372036854775.807",
    "9223372036854775.808",
    "-1",
    "-0",
    "NaN",
    "nan",
    "Infinity",
    "-Infinity",
    "1e1000",
    "1e-1000",
    "1e999999999",
    "0.0000000001",
    "1" * 5000,
    "",
    " 1",
    "1Ki1",
    "١",
    "0x10",
)
NUMBERS: Final = (
    0,
    -1,
    -(2**63),
    2**63 - 1,
    2**63,
    2**64 - 1,
    10**30,
    1e308,
    -1e308,
    5e-324,
    -0.0,
    0.5,
    9.223372036854776e18,
)

quantity_text = st.one_of(
    st.sampled_from(QUANTITIES),
    st.builds(
        "{}{}{}{}".format,
        st.sampled_from(["", "-", "+"]),
        st.integers(0, 10**25).map(str),
        st.sampled_from(["", ".5", ".000000000001"]),
        st.sampled_from(["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Gi", "Ei", "e18", "e-9"]),
    ),
    st.text(max_size=8),
)
"""Strings where a quantity is expected: out of range, malformed, or just text."""

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(NUMBERS),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    quantity_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=20,
)
"""Any JSON value (JSON has no NaN: those are put in as raw tokens, see ``raw_tokens``)."""

NAN_TOKEN: Final = "\x00nan\x00"
"""A placeholder a mutation writes where the body should read ``NaN`` (not JSON)."""
INF_TOKEN: Final = "\x00inf\x00"
DEEP_TOKEN: Final = "\x00deep\x00"
RAW_TOKENS: Final = {
    NAN_TOKEN: b"NaN",
    INF_TOKEN: b"1e999",
    "\x00ninf\x00": b"-Infinity",
    DEEP_TOKEN: b"[" * 100_000 + b"]" * 100_000,  # beyond any encoder's recursion
}


def nested(depth: int, leaf: Any = None, *, as_object: bool = False) -> Any:
    """``leaf`` in ``depth`` arrays (or single-member objects)."""
    value = leaf
    for _ in range(depth):
        value = {"a": value} if as_object else [value]
    return value


@st.composite
def mutated(draw: st.DrawFn, seed: Any, *, max_count: int = 2000) -> Any:
    """``seed`` (not changed) with one to three mutations, each at a place drawn evenly
    among all places of the object (so deep leaves such as a container's cpu request are
    hit as often as the top-level keys); at most one of them repeats an array, up to
    ``max_count`` elements."""
    value = copy.deepcopy(seed)
    budget = [max_count]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_places(value)))
        if not path:
            value = draw(_replacements(value, budget))
            continue
        parent, key = _at(value, path[:-1]), path[-1]
        if isinstance(parent, dict) and draw(st.integers(0, 9)) == 0:
            del parent[key]
        else:
            parent[key] = draw(_replacements(parent[key], budget))
    return value


@st.composite
def reshaped(draw: st.DrawFn, seed: Any) -> Any:
    """``seed`` (not changed) with one array made ragged, emptied or doubled, its elements
    otherwise left as they were: a shape error that a type check alone lets through.
    Half the time the array is a matrix or one of its rows (NVLink and topology matrices
    are a handful of the report's hundreds of arrays)."""
    value = copy.deepcopy(seed)
    arrays = [path for path in _places(value) if path and isinstance(_at(value, path), list)]
    if not arrays:
        return value
    matrices = [path for path in arrays if _is_matrix(_at(value, path))]
    rows = [(*path, i) for path in matrices for i in range(len(_at(value, path)))]
    if matrices and draw(st.booleans()):
        arrays = matrices + rows
    path = draw(st.sampled_from(arrays))
    parent, key = _at(value, path[:-1]), path[-1]
    items = parent[key]
    parent[key] = draw(
        st.sampled_from([items[:-1], [*items, *items[-1:]], [], items * 2, items[1:]])
    )
    return value


def _is_matrix(value: list[Any]) -> bool:
    return bool(value) and all(isinstance(row, list) for row in value)


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


_MAX_PLACES_PER_ARRAY: Final = 20
"""Places listed in each array: a repeated array is the same few elements many times."""


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path from the root to a value in it, the root's (``()``) included."""
    places = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            places.extend(_places(item, (*path, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value[:_MAX_PLACES_PER_ARRAY]):
            places.extend(_places(item, (*path, i)))
    return places


def _replacements(value: Any, budget: list[int]) -> st.SearchStrategy[Any]:
    """What may take the place of ``value``: hostile leaves and nests first, weighted up."""
    hostile_leaves = st.one_of(
        quantity_text,
        st.sampled_from(NUMBERS),
        st.sampled_from([NAN_TOKEN, INF_TOKEN, "\x00ninf\x00"]),
        st.just(DEEP_TOKEN),
        st.integers(90, 110).map(nested),
        st.integers(90, 110).map(lambda d: nested(d, as_object=True)),
    )
    options = [hostile_leaves, hostile_leaves, json_values]
    if isinstance(value, list) and value:
        # Ragged or huge arrays: an element dropped, a wrong one added, or many copies.
        options.append(st.just(value[:-1]))
        options.append(json_values.map(lambda extra: [*value, extra]))
        most = budget[0] // len(value)
        if most >= 2:
            options.append(st.integers(2, most).map(lambda n: _repeated(value, n, budget)))
    if isinstance(value, str):
        options.append(st.just([value]))
        options.append(st.just({"value": value}))
    return st.one_of(options)


def _repeated(value: list[Any], times: int, budget: list[int]) -> list[Any]:
    budget[0] = 0  # one huge array per body: repeating a repeated one would explode
    return value * times


def encode_json(value: Any) -> bytes:
    """JSON bytes, with raw tokens (NaN, 1e999) in place of their placeholders."""
    text = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    for placeholder, raw in RAW_TOKENS.items():
        quoted = json.dumps(placeholder).encode()
        text = text.replace(quoted, raw)
    return text
