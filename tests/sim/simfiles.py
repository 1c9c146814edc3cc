"""Helpers for the simulator tests: small CSV files and the shared openb trace."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OPENB = REPO / ".." / "shared" / "traces" / "openb"
REFERENCE = OPENB / "reference_runs"
NODE_HEADER = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_HEADER = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    lines = [",".join(header)] + [",".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def need(path: Path) -> Path:
    """``path``, or skip the test when the shared trace is not next to the repository."""
    if not OPENB.is_dir():
        pytest.skip(f"shared trace directory {OPENB.resolve()} is missing")
    if not path.exists():
        pytest.skip(f"shared trace file {path.resolve()} is missing")
    return path
