"""Run the ``stowage`` command as a user would: a child process of this Python, from the
repository root, output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stowage(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``stowage ARGS…`` with ``env`` (default: this process's) and the repository on the
    path; never raises on a non-zero exit (tests check the code)."""
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**(env or os.environ), "PYTHONPATH": str(REPO)},
        check=False,
    )
