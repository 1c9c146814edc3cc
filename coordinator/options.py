"""The ``stowage coordinator`` command line (kept light: building the ``stowage`` parser
must not import aiohttp's server side, numpy or the Kubernetes client)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--listen",
        metavar="HOST:PORT",
        help="address to serve on (default: the config's listen, 0.0.0.0:8080)",
    )
    add(
        "--extender-listen",
        metavar="HOST:PORT",
        help="serve the kube-scheduler extender (/scheduler/*) here instead of on --listen",
    )
    add(
        "--debug-listen",
        metavar="HOST:PORT",
        help="serve /debug and /ui here (default: the config's server.debug_listen,"
        " 127.0.0.1:8081; port 0 picks a free one)",
    )
    add(
        "--tls-cert-file",
        metavar="PEM",
        help="serve HTTPS with this certificate (chain): on the extender listener if any",
    )
    add("--tls-key-file", metavar="PEM", help="the private key of --tls-cert-file")
    add(
        "--tls-client-ca-file",
        metavar="PEM",
        help="require client certificates signed by this CA on the extender listener (mTLS)",
    )
    add("--config", type=Path, help="YAML settings file (see coordinator/config.py)")
    add("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    add(
        "--standalone",
        action="store_true",
        help="run against a built-in Kubernetes API emulator on 127.0.0.1 (no cluster needed)",
    )
