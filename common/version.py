"""The installed Stowage version, reported by agents so mixed fleets are visible."""

from __future__ import annotations

from functools import cache
from importlib import metadata


@cache
def version() -> str:
    """Read once: package metadata lookups parse files on disk (about a millisecond)."""
    try:
        return metadata.version("stowage")
    except metadata.PackageNotFoundError:
        return "0+unknown"
