"""``stowage plan --explain``: what the eviction planner would evict now and why, asked of
a running coordinator (``GET /debug/plan``), without acting.

    kubectl -n stowage-system port-forward deploy/stowage-coordinator 8081 &   # its debug listener
    stowage plan --explain --pod team-a/train-0
    stowage plan --explain --node gpu-17                            # memory pressure

The coordinator answers from its live view of the cluster (the planner is the one the
leader runs); the command prints it in words, or as JSON with ``--json``. It exits 0 when
there is a plan, 1 when the planner refuses, 2 when the coordinator cannot be asked.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from cli import debugask


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--explain",
        action="store_true",
        required=True,
        help="show the plan and its reasons (the command never evicts)",
    )
    debugask.add_coordinator_argument(parser)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--pod", help="NAMESPACE/NAME of a pending pod (preemption)")
    which.add_argument("--node", help="a node under memory pressure")
    parser.add_argument("--json", action="store_true", help="print the coordinator's JSON")


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        answer = debugask.ask(
            args.coordinator, "/debug/plan", {"pod": args.pod} if args.pod else {"node": args.node}
        )
    except debugask.AskError as e:
        print(f"stowage plan: {e}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(answer, out, indent=2)
        out.write("\n")
    else:
        out.write(words(answer))
    return 0 if "plan" in answer else 1


def words(answer: dict[str, Any]) -> str:
    """The answer as a person reads it."""
    head = f"{answer['trigger']} for {answer['subject']}"
    mode = "dry run: evictions.enabled is false" if answer["dry_run"] else "evictions enabled"
    if "refusal" in answer:
        return f"{head}: nothing would be evicted\n  why: {answer['refusal']}\n"
    plan = answer["plan"]
    cost = plan["cost"]
    lines = [
        f"{head}: would evict {len(plan['victims'])} pod(s) for node {plan['node']} ({mode})",
        f"  why: {plan['reason']}",
        f"  cost: {cost['victims']:.0f} victim(s), levels {cost['levels']:.0f},"
        f" work lost {cost['work_lost_s']:.0f} s, gang members dragged {cost['gang_dragged']:.0f}",
        f"  queue {plan['queue']}: "
        + (
            f"needs approval (kubectl stowage approve {answer['subject']}, once proposed)"
            if plan["needs_approval"]
            else "no approval needed"
        ),
    ]
    for v in plan["victims"]:
        lines.append(
            f"  - {v['pod']} on {v['node']} ({v['level']}, priority {v['priority']}): {v['reason']}"
        )
    lines.append(f"  note: {answer['note']}")
    return "\n".join(lines) + "\n"
