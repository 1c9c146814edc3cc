"""Strict msgpack codec for :mod:`common.schema`.

Decoding is typed: msgpack goes straight into the schema's structs in one pass, which
checks as it builds: unknown or missing fields, wrong types, values outside a field's
bounds (which also refuses NaN and infinities), oversized strings, lists and maps. Any
failure raises :class:`SchemaError` naming the field path
(``psi.system.cpu.some.avg10_pct: expected `float` <= 100.0``) and nothing is returned.
Nothing is coerced silently: an integer field refuses ``3.0`` and ``True``; a float field
accepts an integer, which msgpack writes for whole floats from other encoders.

On the wire a section is a map keyed by field name in declaration order, and
:data:`~common.schema.Absent` is its reason string. The same plain form is what
``stowage agent --output json`` prints.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any, Final, TypeAlias, TypeVar

import msgspec

from common.errors import SchemaError
from common.schema import SCHEMA_VERSION, Directives, NodeReport

MAX_REPORT_BYTES: Final = 1 << 20
"""Largest encoded report accepted (1 MiB); a 110-pod, 8-GPU node encodes to ~60 KiB."""
MAX_DIRECTIVES_BYTES: Final = 64 * 1024

T = TypeVar("T")

Plain: TypeAlias = "dict[str, Plain] | list[Plain] | str | int | float | bool | None"
"""A schema object's plain form: what msgpack and JSON carry."""

_ENCODER: Final = msgspec.msgpack.Encoder()
_REPORTS: Final = msgspec.msgpack.Decoder(NodeReport)
_DIRECTIVES: Final = msgspec.msgpack.Decoder(Directives)
_DECODERS: dict[type[Any], msgspec.msgpack.Decoder[Any]] = {
    NodeReport: _REPORTS,
    Directives: _DIRECTIVES,
}


def to_plain(obj: object) -> Plain:
    """A schema object as plain dicts, lists and scalars (msgpack- and JSON-ready)."""
    plain: Plain = msgspec.to_builtins(obj)
    return plain


def from_plain(tp: type[T], data: object) -> T:
    """Validate plain data against ``tp`` and build it; raise :class:`SchemaError` if invalid."""
    try:
        return msgspec.convert(data, tp, strict=True)
    except msgspec.ValidationError as e:
        raise SchemaError(_message(e)) from e


def validate(obj: T) -> T:
    """Check a struct built in-process against its schema (same rules as decoding).

    Built structs are not checked on construction, and converting a struct to its own
    type returns it unchecked, so this goes through the plain form.
    """
    return from_plain(type(obj), to_plain(obj))


def encode(obj: object) -> bytes:
    """msgpack bytes of a schema object."""
    return _ENCODER.encode(obj)


def decode(tp: type[T], payload: bytes, *, max_bytes: int = MAX_REPORT_BYTES) -> T:
    """Decode and validate msgpack bytes as ``tp``."""
    decoder = _DECODERS.get(tp)
    if decoder is None:
        decoder = _DECODERS[tp] = msgspec.msgpack.Decoder(tp)
    result: T = _decode(decoder, payload, max_bytes)
    return result


def decode_report(payload: bytes, *, max_bytes: int = MAX_REPORT_BYTES) -> NodeReport:
    """Decode and validate an agent's report (the coordinator's ingest path)."""
    return _decode(_REPORTS, payload, max_bytes)


def decode_directives(payload: bytes) -> Directives:
    """Decode and validate the coordinator's answer to a report."""
    return _decode(_DIRECTIVES, payload, MAX_DIRECTIVES_BYTES)


def _decode(decoder: msgspec.msgpack.Decoder[T], payload: bytes, max_bytes: int) -> T:
    """The size check, the typed decode, and on failure the error worth reporting."""
    if len(payload) > max_bytes:
        raise SchemaError(f"payload of {len(payload)} bytes exceeds the {max_bytes}-byte limit")
    try:
        return decoder.decode(payload)
    except msgspec.ValidationError as e:
        _refuse_other_version(payload)
        raise SchemaError(_message(e)) from e
    except (msgspec.DecodeError, TypeError) as e:  # TypeError: not bytes at all
        text = str(e).removeprefix(_MALFORMED)
        raise SchemaError(f"malformed msgpack: {_lower_first(text)}") from e


# ---------------------------------------------------------------- schema version


class _Versioned(msgspec.Struct):
    """Only the version of a payload, whatever else it holds."""

    schema_version: Any = msgspec.UNSET


_VERSION: Final = msgspec.msgpack.Decoder(_Versioned)


def _refuse_other_version(payload: bytes) -> None:
    """Say "another version" rather than whatever field that version changed.

    Run only once the typed decode has failed, so valid payloads never pay for it.
    """
    try:
        version = _VERSION.decode(payload).schema_version
    except (msgspec.DecodeError, RecursionError):
        return  # not even a map with a version: the typed decoder's error says why
    if version is msgspec.UNSET or (version == SCHEMA_VERSION and type(version) is not bool):
        return  # missing, or 1 of the wrong type (1.0): the typed decoder's error says so
    raise SchemaError(
        f"schema_version: unknown schema version {reprlib.repr(version)};"
        f" this build reads {SCHEMA_VERSION}"
    )


# ---------------------------------------------------------------- messages

# "... - at `$.psi.cgroups[...]`", or "... - at `key` in `$.pods.pods[0].labels`".
_WHERE: Final = re.compile(r" - at (`key` in )?`\$\.?([^`]*)`$")
_MALFORMED: Final = "MessagePack data is malformed: "


def _message(e: msgspec.ValidationError) -> str:
    """The decoder's message with its path in front, dotted (``a.b[3]: expected …``)."""
    text = str(e)
    where = _WHERE.search(text)
    path = "<root>"
    if where is not None:
        text = text[: where.start()]
        path = where[2] or path
        if where[1]:
            path += ".<key>"
    return f"{path}: {_lower_first(text)}"


def _lower_first(text: str) -> str:
    """The decoder's sentence as the rest of a message (``Expected`` → ``expected``)."""
    return text[:1].lower() + text[1:]
