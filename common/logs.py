"""Logging setup shared by every ``stowage`` subcommand: one line per event, to stderr."""

from __future__ import annotations

import logging
import sys


def setup(level: str = "INFO") -> None:
    """Configure the root logger once; ``level`` is a logging level name."""
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
