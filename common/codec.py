"""Strict msgpack codec for :mod:`common.schema`.

Decoding is driven by the dataclasses' type hints, compiled once per type into small
closures, so a report is validated in one pass: unknown or missing keys, wrong types,
NaN/inf, values outside a field's ``Range`` and oversized strings or lists all raise
:class:`SchemaError` with the field path (``psi.system.cpu.some.avg10_pct: …``).
:func:`decode` first tries a faster compiled form of the same rules that tracks no path
(see "fast path" below) and falls back to the path-naming decoders when it refuses.
Nothing is coerced silently: an integer field refuses ``3.0`` and ``True``; a float field
accepts an integer, which msgpack writes for whole floats from other encoders.

On the wire, :class:`Absent` is the map ``{"absent": reason}``; sections are maps keyed by
field name. The same plain form is what ``stowage agent --output json`` prints.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Final, TypeVar

import msgpack

from common.errors import SchemaError
from common.schema import SCHEMA_VERSION, Absent, Directives, MaxLen, NodeReport, Range

MAX_REPORT_BYTES: Final = 1 << 20
"""Largest encoded report accepted (1 MiB); a 110-pod, 8-GPU node encodes to ~60 KiB."""
_MAX_STR: Final = 1 << 16

T = TypeVar("T")
_Decoder = Callable[[Any, str], Any]


def to_plain(obj: Any) -> Any:
    """A dataclass tree as plain dicts, lists and scalars (msgpack- and JSON-ready)."""
    return _encoder(type(obj))(obj)


def from_plain(tp: type[T], data: Any) -> T:
    """Validate plain data against ``tp`` and build it; raise :class:`SchemaError` if invalid."""
    result: T = _decoder(tp)(data, "")
    return result


def validate(obj: T) -> T:
    """Check a dataclass built in-process against its schema (same rules as decoding)."""
    return from_plain(type(obj), to_plain(obj))


def encode(obj: Any) -> bytes:
    """msgpack bytes of a schema object."""
    packed: bytes = msgpack.packb(to_plain(obj), use_bin_type=True)
    return packed


def decode(tp: type[T], payload: bytes, *, max_bytes: int = MAX_REPORT_BYTES) -> T:
    """Decode and validate msgpack bytes as ``tp``."""
    if len(payload) > max_bytes:
        raise SchemaError(f"payload of {len(payload)} bytes exceeds the {max_bytes}-byte limit")
    try:
        data = msgpack.unpackb(
            payload,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=_MAX_STR,
            max_bin_len=0,
            ext_hook=_refuse_ext,
        )
    except SchemaError:
        raise
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise SchemaError(f"malformed msgpack: {e}") from e
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise SchemaError(f"malformed msgpack: {e}") from e
    if isinstance(data, dict) and "schema_version" in data:
        version = data["schema_version"]
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise SchemaError(
                f"schema_version: unsupported version {version!r};"
                f" this build reads {SCHEMA_VERSION}"
            )
    try:
        result: T = _fast(tp)(data)
        return result
    except Exception:  # any doubt goes to the decoders that name the field
        pass
    return from_plain(tp, data)


def decode_report(payload: bytes, *, max_bytes: int = MAX_REPORT_BYTES) -> NodeReport:
    return decode(NodeReport, payload, max_bytes=max_bytes)


def decode_directives(payload: bytes) -> Directives:
    return decode(Directives, payload, max_bytes=64 * 1024)


def _refuse_ext(code: int, data: bytes) -> Any:
    raise SchemaError(f"malformed msgpack: extension type {code} is not allowed")


# ---------------------------------------------------------------- compiled encoders
#
# Encoding walks the declared types, not the values, so each field costs one call and no
# isinstance chain. Values of the wrong type pass through unchanged: validation (or
# msgpack) rejects them, not the encoder.

_Encoder = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


@cache
def _encoder(tp: Any) -> _Encoder:
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        rest = [o for o in typing.get_args(tp) if o not in (type(None), Absent)]
        inner = _encoder(rest[0]) if len(rest) == 1 else _same

        def encode_union(value: Any) -> Any:
            if value is None:
                return None
            if type(value) is Absent:
                return {"absent": value.reason}
            return inner(value)

        return encode_union
    if origin is list:
        item = _encoder(typing.get_args(tp)[0])
        if item is _same:
            return list
        return lambda value: [item(v) for v in value]
    if origin is dict:
        item = _encoder(typing.get_args(tp)[1])
        if item is _same:
            return dict
        return lambda value: {k: item(v) for k, v in value.items()}
    if tp is Absent:
        return lambda value: {"absent": value.reason}
    if dataclasses.is_dataclass(tp):
        return _dataclass_encoder(tp)
    return _same


def _dataclass_encoder(tp: type) -> _Encoder:
    hints = typing.get_type_hints(tp, include_extras=True)
    names = [f.name for f in _fields(tp)]
    # Resolved on first use, so self-referencing types compile without recursion.
    encoders: list[_Encoder] = []

    def encode_dataclass(value: Any) -> Any:
        if type(value) is not tp:  # a wrong value: hand it over as is for validation to name
            return to_plain(value) if dataclasses.is_dataclass(value) else value
        if not encoders:
            encoders.extend(_encoder(hints[n]) for n in names)
        return {n: e(getattr(value, n)) for n, e in zip(names, encoders, strict=True)}

    return encode_dataclass


# ---------------------------------------------------------------- compiled decoders


@cache
def _fields(tp: type) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(tp)


@cache
def _decoder(tp: Any) -> _Decoder:
    """Build the validating decoder for one type annotation (cached per type)."""
    bounds: Range | None = None
    max_len: int | None = None
    if typing.get_origin(tp) is typing.Annotated:
        base, *meta = typing.get_args(tp)
        for m in meta:
            if isinstance(m, Range):
                bounds = m
            elif isinstance(m, MaxLen):
                max_len = m.n
        tp = base
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(typing.get_args(tp))
    if origin is list:
        return _list_decoder(_decoder(typing.get_args(tp)[0]), max_len)
    if origin is dict:
        key_tp, value_tp = typing.get_args(tp)
        return _dict_decoder(_decoder(key_tp), _decoder(value_tp), max_len)
    if tp is Absent:
        return _decode_absent
    if dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    if tp is bool:
        return _decode_bool
    if tp is int:
        return _int_decoder(bounds)
    if tp is float:
        return _float_decoder(bounds)
    if tp is str:
        return _str_decoder(max_len if max_len is not None else _MAX_STR)
    if tp is type(None):
        return _decode_none
    raise TypeError(f"codec cannot handle type {tp!r}")


def _where(path: str) -> str:
    return path or "<root>"


def _type_name(value: Any) -> str:
    return "nil" if value is None else type(value).__name__


def _decode_none(value: Any, path: str) -> None:
    if value is not None:
        raise SchemaError(f"{_where(path)}: expected nil, got {_type_name(value)}")


def _decode_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise SchemaError(f"{_where(path)}: expected a boolean, got {_type_name(value)}")
    return value


def _int_decoder(bounds: Range | None) -> _Decoder:
    lo = bounds.lo if bounds else -(2**63)
    hi = bounds.hi if bounds else 2**63 - 1

    def decode_int(value: Any, path: str) -> int:
        if type(value) is not int:
            raise SchemaError(f"{_where(path)}: expected an integer, got {_type_name(value)}")
        if not lo <= value <= hi:
            # str() of an int beyond 4300 digits raises ValueError; such values only come
            # from from_plain() (msgpack ints fit in 64 bits), but must still be a SchemaError.
            shown = value if value.bit_length() <= 1024 else f"a {value.bit_length()}-bit integer"
            raise SchemaError(f"{_where(path)}: {shown} is outside [{lo:g}, {hi:g}]")
        return value

    return decode_int


def _float_decoder(bounds: Range | None) -> _Decoder:
    lo = bounds.lo if bounds else -math.inf
    hi = bounds.hi if bounds else math.inf

    def decode_float(value: Any, path: str) -> float:
        if type(value) is int:
            if not -(2**1023) <= value <= 2**1023:  # float() would raise OverflowError
                raise SchemaError(f"{_where(path)}: integer is outside [{lo:g}, {hi:g}]")
            value = float(value)
        elif type(value) is not float:
            raise SchemaError(f"{_where(path)}: expected a number, got {_type_name(value)}")
        if not math.isfinite(value):
            raise SchemaError(f"{_where(path)}: {value} is not a finite number")
        if not lo <= value <= hi:
            raise SchemaError(f"{_where(path)}: {value} is outside [{lo:g}, {hi:g}]")
        return value

    return decode_float


def _str_decoder(max_len: int) -> _Decoder:
    def decode_str(value: Any, path: str) -> str:
        if type(value) is not str:
            raise SchemaError(f"{_where(path)}: expected a string, got {_type_name(value)}")
        if len(value) > max_len:
            raise SchemaError(f"{_where(path)}: string of {len(value)} chars exceeds {max_len}")
        return value

    return decode_str


def _decode_absent(value: Any, path: str) -> Absent:
    if type(value) is not dict or set(value) != {"absent"}:
        raise SchemaError(f"{_where(path)}: expected {{'absent': reason}}")
    reason = value["absent"]
    if type(reason) is not str or not reason or len(reason) > 4096:
        raise SchemaError(f"{_where(path)}.absent: expected a non-empty reason string")
    return Absent(reason)


def _is_absent(value: Any) -> bool:
    return type(value) is dict and len(value) == 1 and type(value.get("absent")) is str


def _union_decoder(options: tuple[Any, ...]) -> _Decoder:
    nullable = type(None) in options
    absentable = Absent in options
    rest = [o for o in options if o not in (type(None), Absent)]
    if len(rest) != 1:
        raise TypeError(f"codec supports X | None | Absent unions only, got {options!r}")
    inner = _decoder(rest[0])

    def decode_union(value: Any, path: str) -> Any:
        if value is None and nullable:
            return None
        if absentable and _is_absent(value):
            return _decode_absent(value, path)
        return inner(value, path)

    return decode_union


def _list_decoder(item: _Decoder, max_len: int | None) -> _Decoder:
    cap = max_len if max_len is not None else 4096

    def decode_list(value: Any, path: str) -> list[Any]:
        if type(value) is not list:
            raise SchemaError(f"{_where(path)}: expected a list, got {_type_name(value)}")
        if len(value) > cap:
            raise SchemaError(f"{_where(path)}: list of {len(value)} items exceeds {cap}")
        return [item(v, f"{path}[{i}]") for i, v in enumerate(value)]

    return decode_list


def _dict_decoder(key: _Decoder, item: _Decoder, max_len: int | None) -> _Decoder:
    cap = max_len if max_len is not None else 4096

    def decode_dict(value: Any, path: str) -> dict[Any, Any]:
        if type(value) is not dict:
            raise SchemaError(f"{_where(path)}: expected a map, got {_type_name(value)}")
        if len(value) > cap:
            raise SchemaError(f"{_where(path)}: map of {len(value)} entries exceeds {cap}")
        return {key(k, f"{path}.<key>"): item(v, f"{path}[{k!r}]") for k, v in value.items()}

    return decode_dict


def _dataclass_decoder(tp: type) -> _Decoder:
    hints = typing.get_type_hints(tp, include_extras=True)
    fields = [
        (f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        for f in _fields(tp)
    ]
    names = frozenset(name for name, _ in fields)
    # Resolve field decoders lazily so mutually nested types compile without recursion issues.
    field_decoders: dict[str, _Decoder] = {}

    def decode_dataclass(value: Any, path: str) -> Any:
        if type(value) is not dict:
            raise SchemaError(f"{_where(path)}: expected a map, got {_type_name(value)}")
        unknown = value.keys() - names
        if unknown:
            raise SchemaError(f"{_where(path)}: unknown field {sorted(map(str, unknown))[0]!r}")
        kwargs = {}
        prefix = f"{path}." if path else ""
        for name, required in fields:
            if name not in value:
                if required:
                    raise SchemaError(f"{prefix}{name}: missing")
                continue
            dec = field_decoders.get(name)
            if dec is None:
                dec = field_decoders[name] = _decoder(hints[name])
            kwargs[name] = dec(value[name], prefix + name)
        return tp(**kwargs)

    return decode_dataclass


# ---------------------------------------------------------------- fast path
#
# The decoders above carry a field path into every call so an error can name the field.
# Valid payloads -- nearly all of them -- never need it, and on the coordinator's ingest
# path building it (and a closure call per value) is most of the decoding cost. So
# decode() first runs a second compilation of the same rules: per dataclass, generated
# Python source that checks every scalar field inline, builds the dataclass, and raises
# a bare _Invalid at the first doubt. decode() then re-runs the decoders above on the same
# data, which raise the SchemaError naming the field (or accept, if the fast path was
# merely stricter). So the fast path must never accept what the decoders above refuse,
# and must build the same value when both accept; tests/common/test_codec_fastpath.py
# checks both on generated and on mutated reports.
#
# Lists of values needing no conversion (ints, strings, bools, None, lists of those) are
# checked in place and kept: msgpack made them for this call, nobody else holds them.


class _Invalid(Exception):
    """The fast path's only refusal; never escapes :func:`decode`."""


_MISSING: Final = object()
_INT_LO: Final = -(2**63)
_INT_HI: Final = 2**63 - 1
_FLOAT_INT_BOUND: Final = 2**1023


@cache
def _fast(tp: Any) -> Callable[[Any], Any]:
    """The compiled fast checker-and-builder of one type annotation."""
    if dataclasses.is_dataclass(tp):
        return _FastCompiler().dataclass(tp)
    return _FastCompiler().value(tp)


def _fast_absent(value: Any) -> Absent:
    """``{"absent": reason}``, checked as :func:`_decode_absent` does."""
    if type(value) is not dict or len(value) != 1:
        raise _Invalid
    reason = value.get("absent", _MISSING)
    if type(reason) is not str or not reason or len(reason) > 4096:
        raise _Invalid
    return Absent(reason)


def _in_place(tp: Any) -> bool:
    """Whether a value of this type is accepted unchanged (so a list of them can be kept)."""
    tp, _, _ = _unannotated(tp)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return Absent not in typing.get_args(tp) and all(_in_place(o) for o in typing.get_args(tp))
    if origin is list:
        return _in_place(typing.get_args(tp)[0])
    return tp in (int, str, bool, type(None))


def _unannotated(tp: Any) -> tuple[Any, Range | None, int | None]:
    bounds: Range | None = None
    max_len: int | None = None
    if typing.get_origin(tp) is typing.Annotated:
        base, *meta = typing.get_args(tp)
        for m in meta:
            if isinstance(m, Range):
                bounds = m
            elif isinstance(m, MaxLen):
                max_len = m.n
        tp = base
    return tp, bounds, max_len


class _FastCompiler:
    """Writes the source of one fast function; ``env`` holds what the source refers to."""

    def __init__(self) -> None:
        self.env: dict[str, Any] = {
            "_Invalid": _Invalid,
            "_MISSING": _MISSING,
            "_absent": _fast_absent,
            "isfinite": math.isfinite,
            "BIG": _FLOAT_INT_BOUND,
            "_new": object.__new__,
            "_set": object.__setattr__,
        }
        self.lines: list[str] = []
        self._names = 0

    def constant(self, prefix: str, value: Any) -> str:
        """Source for a constant: a literal where it is one exactly (ints, finite floats)."""
        if type(value) is int or (type(value) is float and math.isfinite(value)):
            return repr(value)
        return self.name(prefix, value)

    def name(self, prefix: str, value: Any = _MISSING) -> str:
        self._names += 1
        name = f"{prefix}{self._names}"
        if value is not _MISSING:
            self.env[name] = value
        return name

    def build(self, name: str) -> Callable[[Any], Any]:
        source = "\n".join(self.lines) + "\n"
        exec(compile(source, f"<codec fast path: {name}>", "exec"), self.env)
        fn: Callable[[Any], Any] = self.env[name]
        return fn

    def value(self, tp: Any) -> Callable[[Any], Any]:
        self.lines.append("def fast(x):")
        self.check(tp, "x", "    ")
        self.lines.append("    return x")
        return self.build("fast")

    def dataclass(self, tp: type) -> Callable[[Any], Any]:
        hints = typing.get_type_hints(tp, include_extras=True)
        fields = _fields(tp)
        optional = [
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            for f in fields
        ]
        emit = self.lines.append
        emit("def fast(v):")
        emit("    if type(v) is not dict: raise _Invalid")
        count = str(optional.count(False))
        if any(optional):
            emit(f"    n = {count}")
            count = "n"
        names = []
        for f, has_default in zip(fields, optional, strict=True):
            var = self.name("f")
            names.append((f.name, var))
            if not has_default:
                emit(f"    {var} = v[{f.name!r}]")  # KeyError: missing, refused by decode()
                self.check(hints[f.name], var, "    ")
                continue
            emit(f"    {var} = v.get({f.name!r}, _MISSING)")
            emit(f"    if {var} is _MISSING:")
            if f.default is not dataclasses.MISSING:
                emit(f"        {var} = {self.name('default', f.default)}")
            else:
                emit(f"        {var} = {self.name('factory', f.default_factory)}()")
            emit("    else:")
            emit("        n += 1")
            self.check(hints[f.name], var, "        ")
        emit(f"    if len(v) != {count}: raise _Invalid")  # a key that is no field
        cls = self.name("cls", tp)
        if hasattr(tp, "__post_init__") or not all(f.init for f in fields):
            emit(f"    return {cls}({', '.join(f'{n}={var}' for n, var in names)})")
        else:
            # What the generated __init__ of a frozen dataclass does, minus parsing keyword
            # arguments and looking up object.__setattr__ per field: twice as fast.
            emit(f"    o = _new({cls})")
            emit("".join(f"    _set(o, {n!r}, {var})\n" for n, var in names).rstrip())
            emit("    return o")
        return self.build("fast")

    def check(self, tp: Any, var: str, ind: str) -> None:
        """Lines that check ``var`` against ``tp``, reassigning it if it must be converted."""
        emit = self.lines.append
        tp, bounds, max_len = _unannotated(tp)
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            options = typing.get_args(tp)
            rest = [o for o in options if o not in (type(None), Absent)]
            if len(rest) != 1:
                raise TypeError(f"codec supports X | None | Absent unions only, got {options!r}")
            branch = "if"
            if type(None) in options:
                emit(f"{ind}if {var} is None: pass")
                branch = "elif"
            if Absent in options:
                emit(
                    f"{ind}{branch} type({var}) is dict and len({var}) == 1"
                    f" and type({var}.get('absent')) is str:"
                )
                emit(f"{ind}    {var} = _absent({var})")
            emit(f"{ind}else:")
            self.check(rest[0], var, ind + "    ")
        elif origin is list:
            cap = max_len if max_len is not None else 4096
            (item,) = typing.get_args(tp)
            emit(f"{ind}if type({var}) is not list or len({var}) > {cap}: raise _Invalid")
            each = self.name("e")
            if _in_place(item):
                emit(f"{ind}for {each} in {var}:")
                self.check(item, each, ind + "    ")
            else:
                fn = self.name("item", _fast(item))
                emit(f"{ind}{var} = [{fn}({each}) for {each} in {var}]")
        elif origin is dict:
            cap = max_len if max_len is not None else 4096
            key_tp, value_tp = typing.get_args(tp)
            emit(f"{ind}if type({var}) is not dict or len({var}) > {cap}: raise _Invalid")
            key, each = self.name("k"), self.name("e")
            if _in_place(key_tp) and _in_place(value_tp):
                emit(f"{ind}for {key}, {each} in {var}.items():")
                self.check(key_tp, key, ind + "    ")
                self.check(value_tp, each, ind + "    ")
            else:
                kf = self.name("key", _fast(key_tp))
                vf = self.name("value", _fast(value_tp))
                emit(
                    f"{ind}{var} = {{{kf}({key}): {vf}({each}) for {key}, {each} in {var}.items()}}"
                )
        elif tp is Absent:
            emit(f"{ind}{var} = _absent({var})")
        elif dataclasses.is_dataclass(tp):
            emit(f"{ind}{var} = {self.name('dc', _fast(tp))}({var})")
        elif tp is bool:
            emit(f"{ind}if {var} is not True and {var} is not False: raise _Invalid")
        elif tp is int:
            lo = self.constant("lo", bounds.lo if bounds else _INT_LO)
            hi = self.constant("hi", bounds.hi if bounds else _INT_HI)
            emit(f"{ind}if type({var}) is not int or not {lo} <= {var} <= {hi}: raise _Invalid")
        elif tp is float:
            lo = self.constant("lo", bounds.lo if bounds else -math.inf)
            hi = self.constant("hi", bounds.hi if bounds else math.inf)
            emit(f"{ind}if type({var}) is not float:")
            emit(f"{ind}    if type({var}) is not int or not -BIG <= {var} <= BIG: raise _Invalid")
            emit(f"{ind}    {var} = float({var})")
            if not (bounds and math.isfinite(bounds.lo) and math.isfinite(bounds.hi)):
                emit(f"{ind}if not isfinite({var}): raise _Invalid")
            emit(f"{ind}if not {lo} <= {var} <= {hi}: raise _Invalid")
        elif tp is str:
            limit = max_len if max_len is not None else _MAX_STR
            emit(f"{ind}if type({var}) is not str or len({var}) > {limit}: raise _Invalid")
        elif tp is type(None):
            emit(f"{ind}if {var} is not None: raise _Invalid")
        else:
            raise TypeError(f"codec cannot handle type {tp!r}")
