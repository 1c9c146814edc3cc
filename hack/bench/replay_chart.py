"""The trace replays' chart: nodes in use over the replay's time, one line per variant and
one panel per workload (:mod:`hack.bench.defrag_replay`, :mod:`hack.bench.consolidation_replay`).

matplotlib is the ``sim`` extra's (``pip install '.[sim]'``), imported only when a chart is
asked for: the replays' tables need none of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from hack.bench.trace_replay import Series


def nodes_in_use(path: Path, panels: Sequence[tuple[str, Mapping[str, Series]]]) -> None:
    """PNG at ``path``: per panel (its title, each variant's series), the nodes in use as a
    step line over replay hours."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 3.2 * max(1, len(panels))), squeeze=False)
    styles = ("-", "--", ":")
    for ax, (title, variants) in zip(axes.flat, panels, strict=True):
        for j, (label, series) in enumerate(variants.items()):
            if series:
                start = series[0][0]
                hours = [(t - start) / 3600 for t, _ in series]
                ax.step(
                    hours, [n for _, n in series], where="post", label=label, linewidth=1,
                    linestyle=styles[j % len(styles)],
                )  # fmt: skip
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("hours since the first arrival (replay clock)")
        ax.set_ylabel("nodes in use")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
