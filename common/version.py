"""The installed Stowage version, reported by agents so mixed fleets are visible."""

from __future__ import annotations

from importlib import metadata


def version() -> str:
    try:
        return metadata.version("stowage")
    except metadata.PackageNotFoundError:
        return "0+unknown"
