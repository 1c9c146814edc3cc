"""The ``stowage`` command: one entry point, one subcommand per part of the system."""

from __future__ import annotations

import argparse
import functools
import sys

from common import logs
from common.version import version


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` shows each option's default, unless its help already says it in words
    or there is none to show (argparse's own defaults formatter prints ``None``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, "", argparse.SUPPRESS) or "default" in text:
            return action.help
        return f"{text} (default: %(default)s)"


def build_parser(prog: str = "stowage") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=DefaultsHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"stowage {version()}")
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="DEBUG, INFO, WARNING or ERROR",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser = functools.partial(sub.add_parser, formatter_class=DefaultsHelpFormatter)

    from agent import main as agent_main

    agent = add_parser("agent", help="node agent: collect this node's signals and report")
    agent_main.add_arguments(agent)
    agent.set_defaults(run=agent_main.main)

    from coordinator import options as coordinator_options

    coordinator = add_parser(
        "coordinator", help="serve reports and scheduler calls; watch, lead, publish"
    )
    coordinator_options.add_arguments(coordinator)
    coordinator.set_defaults(run=_coordinator)

    sim_help = "replay a pod trace under placement policies"
    try:
        from hack.sim import options as sim_options
    except ModuleNotFoundError as e:  # the product image: no hack/, no simulator extras
        # Every argument taken as a word (no option prefix), so any command line gets the
        # one-line answer below rather than a usage error.
        sim = add_parser("sim", help=sim_help, prefix_chars="\0")
        sim.add_argument("ignored", nargs="*", help=argparse.SUPPRESS)
        sim.set_defaults(run=functools.partial(_not_installed, "stowage sim", e))
    else:
        sim = add_parser("sim", help=sim_help)
        sim_options.add_arguments(sim)
        sim.set_defaults(run=_sim)

    from cli import plan as plan_cli

    plan = add_parser(
        "plan", help="what the eviction planner would evict now, and why (never evicts)"
    )
    plan_cli.add_arguments(plan)
    plan.set_defaults(run=plan_cli.main)

    from cli import approve as approve_cli

    approve = add_parser("approve", help="approve the preemption plan published on a pending pod")
    approve_cli.add_arguments(approve)
    approve.set_defaults(run=approve_cli.main)

    from cli import colocation as colocation_cli

    colocation = add_parser(
        "colocation", help="why each node's best-effort pods are CPU-throttled now"
    )
    colocation_cli.add_arguments(colocation)
    colocation.set_defaults(run=colocation_cli.main)

    from cli import patrol as patrol_cli

    patrol = add_parser("patrol", help="each node's utilisation over a window, and a PNG heatmap")
    patrol_cli.add_arguments(patrol)
    patrol.set_defaults(run=patrol_cli.main)

    from cli import top as top_cli

    top = add_parser("top", help="every node's fullness, fragmentation, pressure, staleness")
    top_cli.add_arguments(top)
    top.set_defaults(run=top_cli.main)
    return parser


def _coordinator(args: argparse.Namespace) -> int:
    # aiohttp's server, numpy and the Kubernetes client load only for this command.
    if args.standalone:
        try:
            from hack import standalone
        except ModuleNotFoundError as e:  # the product image: no hack/
            return _not_installed("stowage coordinator --standalone", e, args)
        code: int = standalone.main(args)
    else:
        from coordinator import main as coordinator_main

        code = coordinator_main.main(args)
    return code


def _not_installed(command: str, missing: ModuleNotFoundError, args: argparse.Namespace) -> int:
    """One line and exit 2 where the development tooling is not installed: the container
    image holds the agent and the coordinator only (no ``hack/``, no ``sim`` extra)."""
    print(
        f"{command}: needs the simulator and demo tooling ({missing.name} is not installed):"
        " run it from a checkout, pip install -e '.[sim]'",
        file=sys.stderr,
    )
    return 2


def _sim(args: argparse.Namespace) -> int:
    from hack.sim import main as sim_main  # numpy and the engine load only for this command

    code: int = sim_main.main(args)
    return code


def main(argv: list[str] | None = None, prog: str = "stowage") -> int:
    args = build_parser(prog).parse_args(argv)
    logs.setup(args.log_level)
    code: int = args.run(args)
    return code


def kubectl_plugin() -> int:
    """``kubectl-stowage``: kubectl runs it for ``kubectl stowage …`` with the words after
    ``stowage`` (``kubectl stowage top --sort frag``): the same subcommands, named so."""
    return main(prog="kubectl stowage")


if __name__ == "__main__":
    sys.exit(main())
