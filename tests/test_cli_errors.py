"""``stowage`` start-up errors an operator meets first: one line that says what to do,
exit 2, never a traceback. Real processes, as an operator runs them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stowage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**(env or os.environ), "PYTHONPATH": str(REPO)},
    )


def test_the_coordinator_outside_a_cluster_points_at_standalone_and_kubeconfig():
    outside = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
    result = stowage("coordinator", env=outside)
    assert result.returncode == 2
    assert result.stderr == (
        "stowage coordinator: error: not inside a Kubernetes cluster"
        " (Service host/port is not set.): pass --kubeconfig PATH,"
        " or --standalone for the built-in API emulator\n"
    )
    assert result.stdout == ""


def test_a_busy_coordinator_port_is_one_line_naming_the_address_and_exit_2():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = stowage("coordinator", "--standalone", "--listen", address)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1
    assert errors[0].startswith(f"stowage coordinator: error: {address}: Address already in use")
