"""The ``stowage coordinator`` command line (kept light: building the ``stowage`` parser
must not import aiohttp's server side, numpy or the Kubernetes client)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--listen", metavar="HOST:PORT", help="address to serve on (default from the config)")
    add("--config", type=Path, help="YAML settings file (see coordinator/config.py)")
    add("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    add(
        "--standalone",
        action="store_true",
        help="run against a built-in Kubernetes API emulator on 127.0.0.1 (no cluster needed)",
    )
