"""``stowage top``: every node's tile as a sortable terminal table, asked of a running
coordinator (``GET /debug/nodes``, the data of its ``/ui`` node map and of its per-node
gauges).

    kubectl -n stowage-system port-forward deploy/stowage-coordinator 8081 &   # its debug listener
    stowage top --sort frag --filter a100
    stowage top --watch 5                                # redraw every 5 s, Ctrl-C ends
    kubectl stowage top …                                # the same, as a kubectl plugin

One line per node in 80 columns: free and total GPUs, how full the fullest resource is,
GPU fragmentation (FGD, milli-GPU typical pods could not use), the share of free memory in
2 MiB blocks, CPU and memory stall (PSI some, %), whether best-effort pods are throttled,
and the age of the latest report (``*``: stale, its signals unknown; ``-``: no agent has
reported). ``!`` after the GPUs: some of them are unhealthy, not offered to new GPU pods.

``--queues`` prints instead each queue's cost over a patrol window (``--window``: 5m, 1h
or 1d; ``GET /debug/patrol/queues``): CPU core-hours and GPU-hours its pods used and
were allocated, and the share used (a queue is a Volcano PodGroup's, else a namespace).
``--hints`` prints instead each bounded queue's autoscaling hint (``GET /debug/hints``):
how many nodes of which node group it should grow by (``none``: it lacks room but no known
group takes its pods; ``-``: it has room), what it lacks (cpu in cores) and its pending
pods; then the deadlocked queues, whose pending pods select a node group no node has.
Exits 0, or 2 with one line when the coordinator cannot be asked or an option is wrong.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TextIO

from cli import debugask

Tile = Mapping[str, Any]

SORTS: Final[Mapping[str, tuple[Callable[[Tile], float | None], str]]] = {
    "fullness": (lambda t: t["fullness"], "fullest first"),
    "frag": (lambda t: t["gpu_frag_milli"], "most fragmented GPU first"),
    "psi": (
        lambda t: max((v for v in (t["psi_cpu"], t["psi_memory"]) if v is not None), default=None),
        "most stalled (CPU or memory) first",
    ),
    "age": (
        lambda t: float("inf") if t["age_s"] is None else t["age_s"],
        "oldest report first, nodes without one at the top",
    ),
}
"""Each sort but ``name``: the number it orders by, largest first (unknown values last,
ties by name), and how the header says it."""

COLUMNS: Final = (
    ("NODE", 18), ("MODEL", 8), ("GPU", 7), ("FULL", 5), ("FRAG", 6), ("CONTIG", 6),
    ("PSI-C", 6), ("PSI-M", 6), ("THR", 3), ("AGE", 6),
)  # fmt: skip
"""Header and width of each column: with a space between, 80 columns in all."""
QUEUE_COLUMNS: Final = (
    ("QUEUE", 20), ("CPU-H USED", 11), ("ALLOC", 10), ("USE", 5),
    ("GPU-H USED", 11), ("ALLOC", 10), ("USE", 5),
)  # fmt: skip
"""The ``--queues`` table's columns, 78 wide."""
HINT_COLUMNS: Final = (
    ("QUEUE", 16),
    ("ADD", 3),
    ("NODE GROUP", 30),
    ("LACKING", 18),
    ("PENDING", 7),
)
"""The ``--hints`` table's columns (queue, group and what is lacking left, counts right;
two spaces around the group), 80 wide."""
CLEAR: Final = "\x1b[H\x1b[2J"
"""ANSI: cursor home, clear the screen (``--watch`` redraws in place)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    debugask.add_coordinator_argument(parser)
    parser.add_argument(
        "--sort", choices=(*SORTS, "name"), default="fullness", help="the order of the rows"
    )
    parser.add_argument("--filter", help="only nodes whose name or GPU model contains this")
    parser.add_argument(
        "--limit", type=_positive_int, help="show only the first N rows (default: all)"
    )
    parser.add_argument(
        "--queues", action="store_true", help="each queue's CPU- and GPU-hours instead of nodes"
    )
    parser.add_argument(
        "--window", default="1h", choices=("5m", "1h", "1d"), help="the window of --queues"
    )
    parser.add_argument(
        "--hints", action="store_true", help="each queue's autoscaling hint instead of nodes"
    )
    parser.add_argument(
        "--watch",
        type=_positive_seconds,
        metavar="SECONDS",
        help="redraw every SECONDS until interrupted (default: print once)",
    )


def main(
    args: argparse.Namespace,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print the table once, or every ``--watch`` seconds until Ctrl-C; ``sleep`` is
    injected so a test can end the loop."""
    out = out or sys.stdout
    params = {"filter": args.filter} if args.filter else {}
    try:
        while True:
            what, path, query = (
                ("queue", "/debug/patrol/queues", {"window": args.window})
                if args.queues
                else ("hint", "/debug/hints", {})
                if args.hints
                else ("node", "/debug/nodes", params)
            )
            try:
                answer = debugask.ask(args.coordinator, path, query)
            except debugask.AskError as e:
                print(f"stowage top: {e}", file=sys.stderr)
                return 2
            rows = answer.get(f"{what}s") if isinstance(answer, dict) else None
            if not isinstance(rows, list):
                print(f"stowage top: {args.coordinator} sent no {what} list", file=sys.stderr)
                return 2
            if args.watch is not None:
                out.write(CLEAR)
            if args.queues:
                out.write(queue_table(rows, answer["window"]["name"], args.limit))
            elif args.hints:
                out.write(hint_table(answer, args.limit))
            else:
                out.write(table(rows, args.sort, args.limit))
            out.flush()
            if args.watch is None:
                return 0
            sleep(args.watch)
    except KeyboardInterrupt:
        return 0


def ordered(tiles: Sequence[Tile], sort: str) -> list[Tile]:
    """The tiles in ``sort`` order (see :data:`SORTS`; ``name``: by name)."""
    by_name = sorted(tiles, key=lambda t: t["name"])
    if sort == "name":
        return by_name
    key = SORTS[sort][0]
    known = [t for t in by_name if key(t) is not None]
    unknown = [t for t in by_name if key(t) is None]
    return sorted(known, key=lambda t: -key(t)) + unknown  # type: ignore[operator]


def table(tiles: Sequence[Tile], sort: str, limit: int | None = None) -> str:
    """The header line, the column titles and one row per tile, in ``sort`` order."""
    rows = ordered(tiles, sort)
    stale = sum(t["stale"] for t in tiles)
    throttled = sum(t["throttled"] for t in tiles)
    sick = sum(bool(t.get("gpu_unhealthy")) for t in tiles)
    unhealthy = f", {sick} with unhealthy GPUs" if sick else ""
    how = "by name" if sort == "name" else SORTS[sort][1]
    lines = [
        f"{len(tiles)} nodes, {stale} stale, {throttled} throttled{unhealthy}; {how}",
        _line([title for title, _ in COLUMNS]),
    ]
    lines += [_line(_cells(t)) for t in rows[:limit]]
    return "\n".join(lines) + "\n"


def queue_table(queues: Sequence[Mapping[str, Any]], window: str, limit: int | None) -> str:
    """The header line, the column titles and one row per queue, most GPU-hours
    allocated first (then CPU-hours, then name)."""
    rows = sorted(queues, key=lambda q: (-q["gpu_allocated_h"], -q["cpu_allocated_h"], q["queue"]))
    lines = [
        f"{len(queues)} queues over the last {window}; most GPU-hours allocated first",
        _line([title for title, _ in QUEUE_COLUMNS], QUEUE_COLUMNS),
    ]
    for q in rows[:limit]:
        cells = [q["queue"]]
        for kind in ("cpu", "gpu"):
            used, allocated = q[f"{kind}_used_h"], q[f"{kind}_allocated_h"]
            share = f"{100 * used / allocated:.0f}%" if allocated else "-"
            cells += [f"{used:.2f}", f"{allocated:.2f}", share]
        lines.append(_line(cells, QUEUE_COLUMNS))
    return "\n".join(lines) + "\n"


def hint_table(answer: Mapping[str, Any], limit: int | None) -> str:
    """The header line, a row per queue (as the coordinator sorts them: by name), and
    the deadlocks below."""
    hints, deadlocks = answer["hints"], answer.get("deadlocks") or []
    lacking = sum(1 for h in hints if h["scale"])
    lines = [
        f"{len(hints)} queues, {lacking} lacking room, {len(deadlocks)} deadlocked;"
        f" {len(answer.get('groups') or [])} node groups known",
        _hint_line([title for title, _ in HINT_COLUMNS]),
    ]
    for h in hints[:limit]:
        add = "-" if not h["scale"] else "none" if h["group"] is None else str(h["nodes"])
        gap = ", ".join(f"{r} {v:g}" for r, v in h["gap"].items()) or "-"
        lines.append(_hint_line([h["queue"], add, h["group"] or "-", gap, str(h["pending"])]))
    if deadlocks:
        lines.append(f"{'DEADLOCKED QUEUE':<16} {'PODS':>4}  SELECTING NO KNOWN GROUP")
        for d in deadlocks[:limit]:
            line = f"{_cut(d['queue'], 16):<16} {d['pods']:>4}  {d['wants']} (e.g. {d['example']})"
            lines.append(_cut(line, 80))
    return "\n".join(lines) + "\n"


def _hint_line(cells: Sequence[str]) -> str:
    (queue, w0), (add, w1), (group, w2), (gap, w3), (pending, w4) = zip(
        cells, (w for _, w in HINT_COLUMNS), strict=True
    )
    return (
        f"{_cut(queue, w0):<{w0}} {_cut(add, w1):>{w1}}  {_cut(group, w2):<{w2}}"
        f"  {_cut(gap, w3):<{w3}} {_cut(pending, w4):>{w4}}"
    ).rstrip()


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` with ``~`` where it is longer."""
    return text if len(text) <= width else text[: width - 1] + "~"


def _cells(t: Tile) -> list[str]:
    gpus = f"{t['gpu_free_milli'] / 1000:.1f}/{t['gpus']}" if t["gpus"] else "-"
    if t.get("gpu_unhealthy"):
        gpus += "!"  # some not offered to new GPU pods (/debug/nodes says why)
    age = "-" if t["age_s"] is None else _duration(t["age_s"]) + ("*" if t["stale"] else "")
    return [
        t["name"],
        t["gpu_model"] or "-",
        gpus,
        _pct(t["fullness"]),
        "-" if t["gpu_frag_milli"] is None else f"{t['gpu_frag_milli']:.0f}",
        _pct(t["contiguity"]),
        _number(t["psi_cpu"]),
        _number(t["psi_memory"]),
        "yes" if t["throttled"] else "-",
        age,
    ]


def _line(cells: Sequence[str], columns: Sequence[tuple[str, int]] = COLUMNS) -> str:
    """Cells in their columns: text left (the first two of the nodes' table, the first
    of the queues'), numbers right, cut to fit with ``~``."""
    out = []
    left = 2 if columns is COLUMNS else 1
    for i, (cell, (_, width)) in enumerate(zip(cells, columns, strict=True)):
        cell = _cut(cell, width)
        out.append(cell.ljust(width) if i < left else cell.rjust(width))
    return " ".join(out).rstrip()


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _duration(seconds: float) -> str:
    """At most 5 characters: ``42s``, ``17m``, ``5h``, ``3d``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _positive_int(text: str) -> int:
    """ASCII digits only, at most 9 of them: ``int()`` takes other scripts' digits too,
    and raises on more than 4,300 (argparse would then print the whole string)."""
    if not (text.isascii() and text.isdecimal()) or len(text) > 9 or int(text) < 1:
        got = repr(text) if len(text) <= 32 else f"{len(text)} characters"
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {got}")
    return int(text)


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds above 0, got {text!r}")
    return seconds
