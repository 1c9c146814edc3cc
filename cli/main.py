"""The ``stowage`` command: one entry point, one subcommand per part of the system."""

from __future__ import annotations

import argparse
import sys

from common import logs
from common.version import version


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stowage", description=__doc__)
    parser.add_argument("--version", action="version", version=f"stowage {version()}")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    sub = parser.add_subparsers(dest="command", required=True)

    from agent import main as agent_main

    agent = sub.add_parser("agent", help="node agent: collect this node's signals and report")
    agent_main.add_arguments(agent)
    agent.set_defaults(run=agent_main.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.setup(args.log_level)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
