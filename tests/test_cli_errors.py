"""``stowage`` start-up errors an operator meets first: one line that says what to do,
exit 2, never a traceback. Real processes, as an operator runs them."""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys

import pytest

from cli import main as cli_main
from tests.clirun import REPO, stowage


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


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ([], "DEBUG, INFO, WARNING or ERROR (default: INFO)"),
        (["agent"], "seconds between reports (default: 10.0)"),
        (["agent"], "kubelet configuration file (default: /var/lib/kubelet/config.yaml)"),
        (["coordinator"], "address to serve on (default: the config's listen, 0.0.0.0:8080)"),
        (["sim"], "seeds: 42-51, or 42,43,50 (default: 42-51)"),
        (["plan"], "base URL of a coordinator's debug listener (default: http://127.0.0.1:8081)"),
        (
            ["colocation"],
            "base URL of a coordinator's debug listener (default: http://127.0.0.1:8081)",
        ),
    ],
)
def test_help_shows_the_defaults(capsys, command, shown):
    with pytest.raises(SystemExit) as exited:
        cli_main.main([*command, "--help"])
    assert exited.value.code == 0
    assert shown in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["agent", "coordinator", "sim", "plan", "colocation"])
def test_every_option_with_a_default_says_it_in_help(capsys, command):
    """None, False and "" are "not given", not a default worth printing."""
    parser = next(
        a for a in cli_main.build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices[command]
    with pytest.raises(SystemExit):
        cli_main.main([command, "--help"])
    options = capsys.readouterr().out.split("\noptions:\n", 1)[1]
    entries = {
        entry.split()[0].rstrip(","): " ".join(entry.split())
        for entry in re.split(r"\n  (?=-)", "\n" + options)
        if entry.strip()
    }
    for action in parser._actions:
        if action.default in (None, False, "", argparse.SUPPRESS):
            continue
        assert "default" in entries[action.option_strings[0]], (command, action.option_strings)


def test_make_run_on_a_busy_port_is_one_error_line_naming_the_address_and_exit_2():
    with socket.create_server(("127.0.0.1", 0)) as spare:
        api_port = spare.getsockname()[1]  # free again below: not 6443, which may be in use
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "hack.demo", "--port", str(port), "--api-port", str(api_port)],
            capture_output=True, text=True, timeout=120, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert errors == [
        f"stowage coordinator: error: 127.0.0.1:{port}: Address already in use"
        f" (while attempting to bind on address ('127.0.0.1', {port}))"
    ]
