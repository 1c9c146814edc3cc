"""The settings loader: strict keys and types with key paths, and bounded YAML files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from common.config import MAX_DEPTH, MAX_FILE_B, MAX_NODES, build, load_file, read_yaml
from common.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class Inner:
    limit_b: int = 10
    ratio: float = 0.5
    names: tuple[str, ...] = ()
    weights: dict[str, int] = field(default_factory=dict)
    note: str | None = None

    def __post_init__(self) -> None:
        if self.limit_b < 0:
            raise ConfigError("inner.limit_b: must not be negative")
        if self.ratio > 1:
            raise ConfigError("ratio above 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class Outer:
    name: str = "x"
    inner: Inner = field(default_factory=Inner)


def test_values_convert_as_their_fields_say():
    built = build(
        Outer,
        {"inner": {"limit_b": 7, "ratio": 1, "names": ["a", "b"], "weights": {"cpu": 2}}},
    )
    assert built == Outer(inner=Inner(limit_b=7, ratio=1.0, names=("a", "b"), weights={"cpu": 2}))
    assert isinstance(built.inner.ratio, float) and isinstance(built.inner.names, tuple)
    assert build(Outer, {"inner": {"note": None}}).inner.note is None
    assert build(Outer, {}) == Outer()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"inner": {"limt_b": 1}}, "inner.limt_b: unknown setting; known: limit_b, ratio, names,"),
        ({"nmae": "y"}, "nmae: unknown setting; known: name, inner"),
        ({"inner": {"limit_b": "10"}}, "inner.limit_b: expected int, got str"),
        ({"inner": {"limit_b": 1.5}}, "inner.limit_b: expected int, got float"),
        ({"inner": {"limit_b": True}}, "inner.limit_b: expected int, got bool"),
        ({"inner": {"ratio": "half"}}, "inner.ratio: expected float, got str"),
        ({"inner": {"ratio": None}}, "inner.ratio: expected float, got null"),
        ({"inner": {"names": "a"}}, "inner.names: expected a list, got str"),
        ({"inner": {"names": ["a", 2]}}, "inner.names[1]: expected str, got int"),
        ({"inner": {"weights": {"cpu": "2"}}}, "inner.weights.cpu: expected int, got str"),
        ({"inner": {"weights": {3: 2}}}, "inner.weights: keys must be strings, got int 3"),
        ({"inner": {"weights": [1]}}, "inner.weights: expected a mapping, got list"),
        ({"inner": []}, "inner: expected a mapping, got list"),
        ({"inner": {"note": 5}}, "inner.note: expected str, got int"),
        ([1], "config: expected a mapping, got list"),
        # __post_init__ checks: a message naming its key is kept, others get the section.
        ({"inner": {"limit_b": -1}}, "inner.limit_b: must not be negative"),
        ({"inner": {"ratio": 2}}, "inner: ratio above 1"),
        ({"inner": {"ratio": float("nan")}}, "inner.ratio: expected a finite number, got nan"),
        ({"inner": {"ratio": float("-inf")}}, "inner.ratio: expected a finite number, got -inf"),
    ],
)
def test_every_refusal_names_the_key_path(data, message):
    with pytest.raises(ConfigError) as info:
        build(Outer, data)
    assert str(info.value).startswith(message)


def test_where_and_source_prefix_the_message():
    with pytest.raises(ConfigError) as info:
        build(Inner, {"limit_b": "x"}, where="fgd", source="c.yaml")
    assert str(info.value) == "c.yaml: fgd.limit_b: expected int, got str"
    with pytest.raises(ConfigError) as info:
        build(Inner, {"ratio": 3}, where="fgd")
    assert str(info.value) == "fgd: ratio above 1"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_load_file_names_the_file_and_the_key(tmp_path):
    path = _write(tmp_path, "inner:\n  limit_b: lots\n")
    with pytest.raises(ConfigError) as info:
        load_file(Outer, path)
    assert str(info.value) == f"{path}: inner.limit_b: expected int, got str"
    assert load_file(Outer, _write(tmp_path, "")) == Outer()  # an empty file: defaults
    with pytest.raises(ConfigError, match="config: expected a mapping, got list"):
        load_file(Outer, _write(tmp_path, "[]\n"))


def test_anchors_and_merge_keys_within_bounds_are_fine(tmp_path):
    path = _write(
        tmp_path,
        "base: &base {cpu: 1, memory: 2}\na: {<<: *base, gpu: 3}\nb: [*base, *base]\n",
    )
    assert read_yaml(path) == {
        "base": {"cpu": 1, "memory": 2},
        "a": {"cpu": 1, "memory": 2, "gpu": 3},
        "b": [{"cpu": 1, "memory": 2}] * 2,
    }


def test_nesting_deeper_than_the_bound_is_refused_before_recursing(tmp_path):
    deep = _write(tmp_path, "a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError) as info:
        read_yaml(deep)
    assert str(info.value) == (
        f"{deep}: invalid YAML: nested deeper than {MAX_DEPTH} levels (line 1)"
    )
    just = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)  # the root mapping is a level
    value = read_yaml(_write(tmp_path, f"a: {just}\n"))["a"]
    for _ in range(MAX_DEPTH - 2):
        assert isinstance(value, list) and len(value) == 1
        value = value[0]
    assert value == []


def test_nesting_through_aliases_is_bounded_too(tmp_path):
    """Each anchor is shallow; chained, the expanded document is 3 × 20 levels deep."""
    level = "[" * 20 + "{}" + "]" * 20
    text = f"a: &a {level}\nb: &b {level.replace('{}', '*a')}\nc: {level.replace('{}', '*b')}\n"
    with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH} levels through aliases"):
        read_yaml(_write(tmp_path, text))


def test_billion_laughs_is_refused_while_composing(tmp_path):
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    with pytest.raises(ConfigError, match=f"more than {MAX_NODES} nodes with aliases expanded"):
        read_yaml(_write(tmp_path, "\n".join(lines)))
    # Six anchors expand to about 1.2 million nodes, within the bound: sharing as such is
    # not refused, and the built object stays small (the lists are shared, not copied).
    small = "\n".join(lines[:6])
    assert len(read_yaml(_write(tmp_path, small))["a5"]) == 10


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"alias \*a is inside the node it names"):
        read_yaml(_write(tmp_path, "a: &a [1, *a]\n"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"a: caf\xe9\n", "not UTF-8 (byte 6 is 0xe9)"),
        (
            b"a: [1,\n",
            "invalid YAML: while parsing a flow node, expected the node content,"
            " but found '<stream end>' (line 2)",
        ),
        (b"a: " + b"9" * 5000 + b"\n", "invalid YAML value: Exceeds the limit (4300"),
        (
            b"a: 1\n---\nb: 2\n",
            "invalid YAML: expected a single document in the stream,"
            " but found another document (line 2)",
        ),
        (b"a: \x07\n", "invalid YAML: unacceptable character #x0007"),
    ],
)
def test_unreadable_files_are_one_line_naming_the_file(tmp_path, content, message):
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    text = str(info.value)
    assert text.startswith(f"{path}: {message}") and "\n" not in text


def test_not_a_regular_file_or_too_big(tmp_path):
    # A FIFO is refused too (tests/common/test_config_cli.py, in a process that may hang).
    with pytest.raises(ConfigError, match=r": not a regular file \(a directory\)"):
        read_yaml(tmp_path)
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(MAX_FILE_B + 1)
    with pytest.raises(ConfigError, match=f"big.yaml: larger than {MAX_FILE_B} bytes"):
        read_yaml(big)
    with pytest.raises(ConfigError, match="No such file or directory"):
        read_yaml(tmp_path / "missing.yaml")
