"""``stowage plan --explain``: what the eviction planner would evict now and why, asked of
a running coordinator (``GET /debug/plan``), without acting; ``stowage plan
--consolidate``: the drain plan (``GET /debug/drains``): the nodes it frees, each pod's
destination, and why the other candidates are not drainable; ``stowage plan --defrag``:
the migrations (``GET /debug/defrag``): for each pending multi-GPU pod, the node it would
get and where each moved pod would go, or why it gets none.

    kubectl -n stowage-system port-forward deploy/stowage-coordinator 8081 &   # its debug listener
    stowage plan --explain --pod team-a/train-0
    stowage plan --explain --node gpu-17                            # memory pressure
    stowage plan --consolidate
    stowage plan --defrag [--pod team-a/train-8gpu]

The coordinator answers from its live view of the cluster (the planner is the one the
leader runs); the command prints it in words, or as JSON with ``--json``. It exits 0 when
there is a plan (a drain: a node it frees; a migration), 1 when there is none, 2 when the
coordinator cannot be asked or the command line is incomplete.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from cli import debugask


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--explain",
        action="store_true",
        help="show the eviction plan for --pod or --node and its reasons (never evicts)",
    )
    mode.add_argument(
        "--consolidate",
        action="store_true",
        help="show the drain plan: the nodes it frees and where their pods go (never drains)",
    )
    mode.add_argument(
        "--defrag",
        action="store_true",
        help="show the migrations for pending multi-GPU pods, or for --pod (never moves a pod)",
    )
    debugask.add_coordinator_argument(parser)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--pod", help="NAMESPACE/NAME of a pending pod (preemption)")
    which.add_argument("--node", help="a node under memory pressure")
    parser.add_argument("--json", action="store_true", help="print the coordinator's JSON")


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    subject = bool(args.pod or args.node)
    if args.explain and subject:
        path, query = "/debug/plan", {"pod": args.pod} if args.pod else {"node": args.node}
    elif args.explain:
        print("stowage plan: --explain needs --pod NAMESPACE/NAME or --node NODE", file=sys.stderr)
        return 2
    elif args.defrag and not args.node:
        path, query = "/debug/defrag", {"pod": args.pod} if args.pod else {}
    elif args.defrag:
        print("stowage plan: --defrag takes --pod, not --node", file=sys.stderr)
        return 2
    elif not subject:
        path, query = "/debug/drains", {}
    else:
        print("stowage plan: --consolidate takes no --pod or --node", file=sys.stderr)
        return 2
    try:
        answer = debugask.ask(args.coordinator, path, query)
    except debugask.AskError as e:
        print(f"stowage plan: {e}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(answer, out, indent=2)
        out.write("\n")
    elif args.consolidate:
        out.write(drain_words(answer))
    elif args.defrag:
        out.write(defrag_words(answer))
    else:
        out.write(words(answer))
    if args.consolidate:
        return 0 if answer["drains"] else 1
    if args.defrag:
        return 0 if answer["migrations"] else 1
    return 0 if "plan" in answer else 1


def drain_words(answer: dict[str, Any]) -> str:
    """The drain plan as a person reads it."""
    if not answer["enabled"]:
        mode = "shown only: drain.enabled is false"
    elif answer["dry_run"]:
        mode = "dry run: evictions.enabled is false"
    else:
        mode = "drains enabled"
    freed = answer["drains"]
    lines = [
        f"drain plan: frees {len(freed)} of {len(answer['candidates'])} candidate node(s) ({mode})"
    ]
    for d in freed:
        state = "draining" if d["draining"] else "new"
        group = f", group {d['group']}" if d["group"] else ""
        lines.append(f"  {d['node']} ({state}{group}): {len(d['moves'])} pod(s) to move")
        lines.extend(f"    - {m['pod']} -> {m['destination']}" for m in d["moves"])
    if answer["blocked"]:
        lines.append("not drainable:")
        lines.extend(f"  {b['node']}: {b['reason']}" for b in answer["blocked"])
    if answer["cut"]:
        lines.append("  (the planning deadline cut the plan: the nodes not reached say so)")
    lines.append(f"  note: {answer['note']}")
    return "\n".join(lines) + "\n"


def defrag_words(answer: dict[str, Any]) -> str:
    """The migrations as a person reads them."""
    if not answer["enabled"]:
        mode = "shown only: defrag.enabled is false"
    elif answer["dry_run"]:
        mode = "dry run: evictions.enabled is false"
    else:
        mode = "migrations enabled"
    found = answer["migrations"]
    lines = [f"migrations: {len(found)} pending pod(s) placed by moving others ({mode})"]
    for m in found:
        approval = ", needs approval" if m["needs_approval"] else ""
        lines.append(f"  {m['pod']} -> {m['node']}: {len(m['moves'])} pod(s) to move{approval}")
        lines.extend(f"    - {v['pod']}: {v['from']} -> {v['destination']}" for v in m["moves"])
    if answer["refused"]:
        lines.append("no migration:")
        lines.extend(f"  {r['pod']}: {r['reason']}" for r in answer["refused"])
    if answer["cut"]:
        lines.append("  (the planning budget ran out: the pods not reached are not listed)")
    lines.append(f"  note: {answer['note']}")
    return "\n".join(lines) + "\n"


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
