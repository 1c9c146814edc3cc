"""``stowage patrol``: each node's utilisation over a patrol window, in words and as a PNG
heatmap, asked of a running coordinator (``GET /debug/patrol``).

    kubectl -n stowage-system port-forward deploy/stowage-coordinator 8081 &   # its debug listener
    stowage patrol --window 1d --png patrol.png

One line per node (mean, peak, how much of the window is sampled, ``candidate`` when the
patrol marks it); with ``--png``, a heatmap: a row per node, a column per bucket (oldest
left), grey where unsampled, candidates' names in bold. Exits 0 on an answer, 2 when the
coordinator cannot be asked.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from cli import debugask


def add_arguments(parser: argparse.ArgumentParser) -> None:
    debugask.add_coordinator_argument(parser)
    parser.add_argument("--window", default="1h", choices=("5m", "1h", "1d"), help="window")
    parser.add_argument("--png", type=Path, help="also write the heatmap to this PNG file")


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        answer = debugask.ask(args.coordinator, "/debug/patrol", {"window": args.window})
    except debugask.AskError as e:
        print(f"stowage patrol: {e}", file=sys.stderr)
        return 2
    out.write(words(answer))
    if args.png is not None:
        heatmap(answer, args.png)
        out.write(f"heatmap written to {args.png}\n")
    return 0


def words(answer: dict[str, Any]) -> str:
    """The answer as a person reads it: one line per node."""
    window, threshold = answer["window"], answer["threshold_pct"]
    nodes = answer["nodes"]
    marked = sum(1 for n in nodes if n["candidate"])
    lines = [
        f"{len(nodes)} nodes sampled over {window['name']}, {marked} under {threshold:g}%"
        " (consolidation candidates)"
    ]
    for n in nodes:
        mean = "-" if n["mean_pct"] is None else f"{n['mean_pct']:.1f}%"
        peak = "-" if n["peak_pct"] is None else f"{n['peak_pct']:.1f}%"
        tail = "  candidate" if n["candidate"] else ""
        lines.append(f"{n['node']}  mean {mean}  peak {peak}  sampled {n['coverage']:.0%}{tail}")
    return "\n".join(lines) + "\n"


def heatmap(answer: dict[str, Any], path: Path) -> None:
    """Write the answer's heatmap to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    nodes = answer["nodes"]
    window = answer["window"]
    grid = np.array(
        [[np.nan if v is None else v for v in n["heat"]] for n in nodes] or [[np.nan]],
        dtype=float,
    )
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="lightgrey")
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.25 * max(1, len(nodes))))
    image = ax.imshow(grid, aspect="auto", cmap=cmap, vmin=0, vmax=100, interpolation="none")
    ax.set_yticks(range(len(nodes)), [n["node"] for n in nodes])
    for label, n in zip(ax.get_yticklabels(), nodes, strict=True):
        label.set_fontweight("bold" if n["candidate"] else "normal")
    ax.set_xlabel(f"{window['bucket_s']:g} s buckets, oldest left")
    ax.set_title(f"utilisation over {window['name']} (bold: under {answer['threshold_pct']:g}%)")
    fig.colorbar(image, ax=ax, label="utilisation %")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
