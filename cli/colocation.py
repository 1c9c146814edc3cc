"""``stowage colocation``: why each node's best-effort pods are (or are not) CPU-throttled
right now, asked of a running coordinator (``GET /debug/colocation``).

    kubectl -n stowage-system port-forward deploy/stowage-coordinator 8081 &   # its debug listener
    stowage colocation --node gpu-17
    stowage colocation                                 # every node throttled now

Prints the answer in words, or as JSON with ``--json``. Ask the leader (or any replica:
followers step the same reports, and the answer says whether its replica leads). Exits 0
on an answer, 2 when the coordinator cannot be asked.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from cli import debugask


def add_arguments(parser: argparse.ArgumentParser) -> None:
    debugask.add_coordinator_argument(parser)
    parser.add_argument("--node", help="one node (default: every node throttled now)")
    parser.add_argument("--json", action="store_true", help="print the coordinator's JSON")


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        answer = debugask.ask(
            args.coordinator, "/debug/colocation", {"node": args.node} if args.node else {}
        )
    except debugask.AskError as e:
        print(f"stowage colocation: {e}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(answer, out, indent=2)
        out.write("\n")
        return 0
    if not answer["leading"]:
        out.write("(this replica does not lead: agents follow the leader's decisions)\n")
    nodes = answer.get("throttled", [answer])
    if not nodes:
        out.write("no node's best-effort pods are throttled now\n")
    for node in nodes:
        out.write(words(node))
    return 0


def words(node: dict[str, Any]) -> str:
    """One node's answer as a person reads it."""
    quota = node["be_cpu_quota_m"]
    state = "not throttled" if quota is None else f"throttled to {quota}m"
    lines = [
        f"{node['node']} (pool {node['pool']}): best-effort {state}",
        f"  why: {node['reason']}",
    ]
    for key, what in (("tightening_in_s", "tightens"), ("relaxing_in_s", "relaxes")):
        if node.get(key) is not None:
            lines.append(f"  next: {what} in {node[key]:.0f} s if the condition holds")
    facts = node.get("facts")
    if facts is not None:
        pressure = facts["pressure_pct"]
        lines.append(
            f"  LS stall: {'unknown' if pressure is None else f'{pressure:.1f}%'}"
            f" ({facts['pressure_source']}); LS use {facts['ls_usage_m']}m, BE use"
            f" {facts['be_usage_m']}m of {facts['allocatable_m']}m allocatable;"
            f" {facts['be_pods']} BE pod(s)"
        )
        applied = facts.get("agent_applied")
        if applied is not None:
            lines.append(
                f"  agent applied: {applied['be_cpu_quota_m']}m ({applied['source']}),"
                f" {applied['local_actions']} local tightening(s)"
                + (f", error: {applied['error']}" if applied["error"] else "")
            )
    if node.get("reclaimable_m") is not None:
        lines.append(f"  reclaimable for batch: {node['reclaimable_m']}m")
    return "\n".join(lines) + "\n"
