"""The ``stowage sim`` command line, kept apart from the simulator so that building the
``stowage`` parser for another subcommand never imports numpy or the scoring engine."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hack.sim import shipped


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--nodes",
        type=Path,
        default=shipped.DEFAULT_NODES,
        help="node list CSV (default: the shipped openb GPU nodes, hack/sim/traces/openb/)",
    )
    add(
        "--pods",
        type=Path,
        action="append",
        help="pod list CSV (repeatable; default: the shipped openb default pod list)",
    )
    add(
        "--policies",
        required=True,
        help="comma list of policies, each NAME[+RULE...][:KEY=VALUE...] "
        "(e.g. stowage:reserve_gpu_cpu=true, fgd+reserve-gpu-cpu)",
    )
    add(
        "--policy-arg",
        action="append",
        metavar="POLICY.KEY=VALUE",
        help="an argument for every entry of POLICY (repeatable; YAML scalar), "
        "e.g. stowage.reserve_gpu_cpu=false",
    )
    add(
        "--admission",
        action="append",
        metavar="RULE",
        help="an admission rule for every policy (repeatable): reserve-gpu-cpu",
    )
    add("--seeds", default="42-51", help="seeds: 42-51, or 42,43,50")
    add("--out", type=Path, required=True, help="output directory")
    add("--jobs", type=int, default=os.cpu_count() or 1, help="parallel processes")
    add(
        "--scheduler",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="run on Dask distributed: the scheduler at ADDRESS (tcp://HOST:8786), or with no "
        "ADDRESS a LocalCluster of --jobs workers (default: --jobs local processes)",
    )
    add("--no-plot", action="store_true", help="skip the PNG")
    add("--no-limit", action="store_true", help="skip the limit (the LP bound) in the summary")
    add(
        "--progress",
        action="store_const",
        const=True,
        help="show the progress bar even when stderr is not a terminal",
    )
