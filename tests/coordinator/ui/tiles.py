"""What a tile of the node map must carry for a node of ``/debug/nodes``: ``data-node``
for the name, ``data-<field>`` (underscores as dashes) for every other field, absent when
the value is null."""

from __future__ import annotations

from typing import Any


def expected_attributes(node: dict[str, Any]) -> dict[str, Any]:
    """The attribute names a tile for ``node`` has, each with the node's value."""
    attrs = {}
    for key, value in node.items():
        if value is None:
            continue
        name = "data-node" if key == "name" else "data-" + key.replace("_", "-")
        attrs[name] = value
    return attrs


def same(attrs: dict[str, str], node: dict[str, Any]) -> bool:
    """Whether a tile's attributes carry exactly ``node``'s values (numbers compared as
    numbers: the page writes JavaScript's shortest form, 1 for 1.0)."""
    want = expected_attributes(node)
    if set(attrs) != set(want):
        return False
    for name, value in want.items():
        if isinstance(value, bool):
            if attrs[name] != str(value).lower():
                return False
        elif isinstance(value, int | float):
            if float(attrs[name]) != value:
                return False
        elif attrs[name] != value:
            return False
    return True
