"""``python -m hack.cluster build`` builds the control plane (once per change of its pins);
``python -m hack.cluster up`` also starts it, prints the kubeconfig to use, and keeps it up
until Ctrl-C or SIGTERM, then stops it and removes its directory (``--dir`` keeps one)."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path

from hack.cluster.build import BuildError, ensure_built
from hack.cluster.controlplane import ControlPlaneError, running


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.cluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the control plane's programs (nothing when already built)")
    up = sub.add_parser(
        "up", help="build if needed, start the control plane, keep it up until stopped"
    )
    up.add_argument(
        "--dir", type=Path, help="keep its files here (default: a temporary directory, removed)"
    )
    args = parser.parse_args(argv)
    try:
        bin_dir = ensure_built()
        if args.command == "build":
            print(bin_dir)
            return 0
        return _up(args.dir)
    except (BuildError, ControlPlaneError) as e:
        print(f"hack.cluster: {e}", file=sys.stderr)
        return 1


def _up(directory: Path | None) -> int:
    """SIGTERM and SIGINT stop it the same way, while starting (the half-started programs
    are stopped) or once up."""
    stop = threading.Event()

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    with tempfile.TemporaryDirectory(prefix="stowage-cluster-") as scratch:
        root = directory or Path(scratch)
        try:
            with running(root) as plane:
                print(f"control plane up: {plane.server}", flush=True)
                print(f"  export KUBECONFIG={plane.kubeconfig}", flush=True)
                print("  Ctrl-C stops it", flush=True)
                stop.wait()
        except KeyboardInterrupt:
            pass
    print("control plane stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
