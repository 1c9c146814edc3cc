"""Strict loading of settings dataclasses from YAML mappings.

Every setting has a documented default on its dataclass; a config file only overrides.
An unknown key, a wrong type or a value its dataclass refuses is a :class:`ConfigError`
naming the dotted key (``publisher.heartbeat_s``) — a typo must never silently fall back
to a default.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from common.errors import ConfigError

T = TypeVar("T")


def load_file(tp: type[T], path: Path | None) -> T:
    """Settings from a YAML file (defaults only when ``path`` is None)."""
    if path is None:
        return build(tp, {})
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {str(e).splitlines()[0]}") from e
    return build(tp, data or {}, source=str(path))


def build(tp: type[T], data: Any, *, where: str = "", source: str = "") -> T:
    """Build dataclass ``tp`` from a mapping, recursively and strictly."""
    prefix = f"{source}: " if source else ""
    try:
        result: T = _build(tp, data, where)
    except ConfigError as e:
        raise ConfigError(f"{prefix}{e}") from e
    return result


def _build(tp: Any, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'config'}: expected a mapping")
    fields = {f.name: f for f in dataclasses.fields(tp)}
    hints = typing.get_type_hints(tp)
    values = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in fields:
            raise ConfigError(f"{path}: unknown setting; known: {', '.join(fields)}")
        values[key] = _value(hints[key], value, path)
    try:
        return tp(**values)
    except ConfigError as e:
        message = str(e)
        raise ConfigError(message if message.startswith(where) else f"{where}: {message}") from e
    except TypeError as e:
        raise ConfigError(f"{where or 'config'}: {e}") from e


def _value(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        rest = [o for o in options if o is not type(None)]
        return _value(rest[0], value, path)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, path)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping")
        _, value_tp = typing.get_args(tp)
        return {str(k): _value(value_tp, v, f"{path}.{k}") for k, v in value.items()}
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise ConfigError(f"{path}: expected a list")
        item_tp = typing.get_args(tp)[0]
        items = [_value(item_tp, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if tp is Any:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) != (tp is bool) or not isinstance(value, tp):
        raise ConfigError(f"{path}: expected {tp.__name__}, got {type(value).__name__}")
    return value
