"""Helpers for the simulator tests: small CSV files and the shared openb trace."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OPENB = REPO / ".." / "shared" / "traces" / "openb"
REFERENCE = OPENB / "reference_runs"
NODE_HEADER = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_HEADER = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")
ALLOW_MISSING = "STOWAGE_ALLOW_MISSING_TRACES"
"""Set to ``1`` on a machine without the shared traces to skip, not fail, the tests that
read them. Ignored where ``CI=true``: CI must run the reference tests or go red."""


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    lines = [",".join(header)] + [",".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def need(path: Path, environ: Mapping[str, str] = os.environ) -> Path:
    """``path``, or fail the test: a reference file that is not there must not pass quietly.

    A skip would turn a CI run without the shared traces green while checking nothing of
    the simulator against the reference runs; only a local run may opt out
    (:data:`ALLOW_MISSING`), and then the skip names the file.
    """
    if path.exists():
        return path
    missing = f"shared trace file {path.resolve()} is missing"
    if environ.get(ALLOW_MISSING) == "1" and environ.get("CI") != "true":
        pytest.skip(f"{missing} ({ALLOW_MISSING}=1)")
    pytest.fail(f"{missing}; set {ALLOW_MISSING}=1 to skip it on a local run", pytrace=False)
