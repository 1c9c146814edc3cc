"""The one settings loader: YAML files and mappings into frozen settings dataclasses.

Every setting has a documented default on its dataclass; a config file only overrides.
An unknown key, a wrong type or a value its dataclass refuses is a :class:`ConfigError`
naming the dotted key (``publisher.heartbeat_s``) — a typo must never silently fall back
to a default. The coordinator's settings and the scoring policies' arguments both load
through :func:`build`.

Conversion is ``msgspec.convert`` (strict: no ``"1"`` for 1, no ``1.5`` for an int, no
``true`` for a number; lists become tuples, ints become floats where a float is wanted;
each dataclass's ``__post_init__`` range checks run and their errors name the section).
A short walk over the type first adds what ``msgspec.convert`` does not do for
dataclasses (checked on msgspec 0.23): it ignores unknown keys (``forbid_unknown_fields``
exists only for ``msgspec.Struct``, and the settings stay dataclasses so that
``dataclasses.replace`` keeps working), and its error paths show a mapping's key as
``[...]`` (``least-allocated.resources.cpu`` would read ``$.resources[...]``). The walk
refuses unknown keys and non-string keys, checks each typed value with
``msgspec.convert`` so the error names its key, and refuses NaN and infinities, which
no setting means.

:func:`read_yaml` reads any YAML file the programs take as configuration (settings,
kubelet's configuration) with bounds: a regular file only (never a FIFO or a device),
at most :data:`MAX_FILE_B` bytes, UTF-8, nesting at most :data:`MAX_DEPTH` deep and —
against "billion laughs" alias bombs — at most :data:`MAX_NODES` nodes once aliases are
expanded. Every failure is one :class:`ConfigError` line naming the file.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml

from common.errors import ConfigError
from common.files import read_regular

T = TypeVar("T")

MAX_FILE_B = 4 * 2**20
"""Largest configuration file read. A coordinator's settings with a static token for each
of 10,000 nodes take under 1 MiB; kubelet's configuration a few KiB."""
MAX_DEPTH = 32
"""Deepest nesting of a YAML document (settings nest four levels). Bounds the recursion
of PyYAML's composer and of everything that walks the result."""
MAX_NODES = MAX_FILE_B
"""Most YAML nodes a document may hold with its aliases expanded: one per byte of the
largest file, so aliases cannot make a document bigger than a file could spell out."""


def load_file(tp: type[T], path: Path | None) -> T:
    """Settings from a YAML file (defaults only when ``path`` is None)."""
    if path is None:
        return build(tp, {})
    data = read_yaml(path)
    return build(tp, {} if data is None else data, source=str(path))


def read_yaml(path: Path) -> Any:
    """The YAML document in ``path``, read within the bounds above; ConfigError otherwise."""
    try:
        text = read_regular(path, MAX_FILE_B).decode()
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 (byte {e.start} is {e.object[e.start]:#04x})") from e
    loader = None
    try:
        loader = _BoundedLoader(text)  # checks for unprintable characters
        return loader.get_single_data()
    except yaml.MarkedYAMLError as e:
        where = f" (line {e.problem_mark.line + 1})" if e.problem_mark else ""
        problem = ", ".join(part for part in (e.context, e.problem) if part)
        raise ConfigError(f"{path}: invalid YAML: {problem}{where}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {str(e).splitlines()[0]}") from e
    except ValueError as e:  # a scalar PyYAML cannot build: a 5,000-digit int, a bad date
        raise ConfigError(f"{path}: invalid YAML value: {str(e)[:200]}") from e
    finally:
        if loader is not None:
            loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the nesting and alias-expansion bounds.

    Measured while composing, before anything is built: each node's size and depth with
    aliases expanded is computed once from its children's (an alias is the node it
    names, already measured), so a bomb is refused in time linear in the file.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._measured: dict[yaml.Node, tuple[int, int]] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self._peek()
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None and target not in self._measured:
                self._refuse(f"alias *{event.anchor} is inside the node it names", event)
            return self._compose(parent, index)
        if self._depth >= MAX_DEPTH:
            self._refuse(f"nested deeper than {MAX_DEPTH} levels", event)
        self._depth += 1
        try:
            node = self._compose(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        size = 1 + sum(self._measured[c][0] for c in children)
        depth = 1 + max((self._measured[c][1] for c in children), default=0)
        if size > MAX_NODES:
            self._refuse(f"more than {MAX_NODES} nodes with aliases expanded", node)
        if depth > MAX_DEPTH:
            self._refuse(f"nested deeper than {MAX_DEPTH} levels through aliases", node)
        self._measured[node] = (size, depth)
        return node

    def _peek(self) -> yaml.Event:
        """The next event, left for the composer to consume."""
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
        return event

    def _compose(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """PyYAML's composition of the next node: its stub allows None, its code returns a
        node or raises."""
        return typing.cast(yaml.Node, super().compose_node(parent, index))

    @staticmethod
    def _refuse(problem: str, at: yaml.Event | yaml.Node) -> typing.NoReturn:
        # The pure-Python loader's marks: the C parser's Mark type never reaches here.
        mark = typing.cast("yaml.error.Mark | None", at.start_mark)
        raise yaml.composer.ComposerError(None, None, problem, mark)


def build(tp: type[T], data: Any, *, where: str = "", source: str = "") -> T:
    """Build dataclass ``tp`` from a mapping, recursively and strictly.

    ``where`` prefixes every key path (a policy's name for its arguments); ``source``
    (the file) prefixes the message.
    """
    prefix = f"{source}: " if source else ""
    try:
        _check(tp, data, where)
        result: T = msgspec.convert(data, tp, strict=True)
    except ConfigError as e:
        raise ConfigError(f"{prefix}{e}") from e
    except msgspec.ValidationError as e:
        # Only a __post_init__ check can fail here (_check passed every key and type):
        # msgspec appends the section it was building ("… - at `$.signals`").
        message, _, at = str(e).partition(" - at `$")
        section = _join(where, at.rstrip("`").lstrip("."))
        if section and not message.startswith(section):
            message = f"{section}: {message}"
        raise ConfigError(f"{prefix}{message}") from e
    return result


def _check(tp: Any, value: Any, path: str) -> None:
    """Refuse unknown and non-string keys, wrong types and non-finite floats, by key path."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return
        tp = next(o for o in options if o is not type(None))
        origin = typing.get_origin(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        known = _fields(tp)
        for key, item in _mapping(value, path).items():
            if key not in known:
                names = ", ".join(known) or "none"
                raise ConfigError(f"{_join(path, str(key))}: unknown setting; known: {names}")
            _check(known[key], item, _join(path, key))
    elif origin is dict:
        _, item_tp = typing.get_args(tp)
        for key, item in _mapping(value, path).items():
            if not isinstance(key, str):
                raise ConfigError(f"{path}: keys must be strings, got {_kind(key)} {key!r}")
            _check(item_tp, item, _join(path, key))
    elif origin in (tuple, list):
        if not isinstance(value, list):
            raise ConfigError(f"{path}: expected a list, got {_kind(value)}")
        for i, item in enumerate(value):
            _check(typing.get_args(tp)[0], item, f"{path}[{i}]")
    elif tp is not Any:
        try:
            msgspec.convert(value, tp, strict=True)
        except msgspec.ValidationError as e:
            raise ConfigError(f"{path}: {_plain(str(e))}") from e
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{path}: expected a finite number, got {value}")


@functools.cache
def _fields(tp: type) -> dict[str, Any]:
    hints = typing.get_type_hints(tp)
    return {f.name: hints[f.name] for f in dataclasses.fields(tp) if f.init}


def _mapping(value: Any, path: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {_kind(value)}")
    return value


_MSGSPEC_KINDS = {"object": "mapping", "array": "list"}


def _plain(message: str) -> str:
    """msgspec's "Expected `int`, got `str`" in this project's words: expected int, got str."""
    message = re.sub(r"`(\w+)`", lambda m: _MSGSPEC_KINDS.get(m[1], m[1]), message)
    return message[:1].lower() + message[1:]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path and key else path or key
