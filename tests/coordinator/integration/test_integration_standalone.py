"""``stowage coordinator --standalone`` as a user runs it: a process printing how to
connect an agent, an agent process connecting with what it printed, kubectl reading the
node's annotations from the printed API URL, and a signal ending it with exit code 0."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from common import annotations as ann
from hack.bench.colocation_rig import Lines
from tests.coordinator.integration.integration_rig import KUBECTL
from tests.kit import free_port, until

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[3]
STOWAGE = [sys.executable, "-m", "cli.main"]
NODE = "standalone-node"
EXIT_S = 20.0


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; any still running at the end are killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def launch(
    processes: list[subprocess.Popen[str]], tmp_path: Path, *args: str
) -> tuple[subprocess.Popen[str], Lines]:
    env = {**os.environ, "NODE_NAME": NODE, "TMPDIR": str(tmp_path), "HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [*STOWAGE, *args], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    processes.append(proc)
    assert proc.stderr is not None
    return proc, Lines(proc.stderr)


def start_coordinator(
    processes: list[subprocess.Popen[str]], tmp_path: Path
) -> tuple[subprocess.Popen[str], Lines, str]:
    listen = f"127.0.0.1:{free_port()}"
    proc, log = launch(processes, tmp_path, "coordinator", "--standalone", "--listen", listen)
    until(lambda: log.find("serving on") or proc.poll() is not None, "the banner")
    assert proc.poll() is None, log.text()
    assert log.find(rf"serving on http://{re.escape(listen)}")
    coordinator = f"http://{listen}"
    until(lambda: http_get(coordinator + "/readyz") == (200, "ready\n"), "/readyz 200")
    return proc, log, coordinator


def stop(proc: subprocess.Popen[str], log: Lines, signum: int) -> str:
    proc.send_signal(signum)
    assert proc.wait(EXIT_S) == 0, log.text()
    text = log.text()
    for trouble in ("Traceback", "never awaited", "Unclosed", "Task was destroyed", "ERROR"):
        assert trouble not in text, text
    assert "WARNING coordinator.kube.leader" not in text, text  # the Lease just works
    return text


def test_standalone_serves_an_agent_kubectl_sees_the_node_and_sigterm_stops_it(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    coordinator, log, url = start_coordinator(processes, tmp_path)
    api = log.find(r"emulated at (http://\S+)")
    token_file = log.find(r"--token-file (\S+)")
    node = log.find(r"--node-name (\S+)")
    assert api and token_file and node, log.text()
    assert node[1] == NODE
    assert Path(token_file[1]).is_relative_to(tmp_path)

    agent, agent_log = launch(
        processes, tmp_path, "agent", "--coordinator", url, "--token-file", token_file[1],
        "--node-name", node[1], "--interval", "0.2", "--pods-source", "none",
    )  # fmt: skip

    def accepted() -> bool:
        status, text = http_get(url + "/metrics")
        found = re.search(r'^stowage_reports_total\{outcome="accepted"\} (\S+)$', text, re.M)
        assert agent.poll() is None, agent_log.text()
        return status == 200 and found is not None and float(found[1]) >= 2

    until(accepted, "the agent's reports accepted")
    assert 'stowage_reports_total{outcome="unauthenticated"}' not in http_get(url + "/metrics")[1]

    def published() -> dict[str, str] | None:
        status, text = http_get(f"{api[1]}/api/v1/nodes/{NODE}")
        assert status == 200, text
        found = json.loads(text)["metadata"].get("annotations") or {}
        return found if found.get(ann.STATE, "").startswith("fresh") else None

    until(published, "the node's annotations fresh")
    if KUBECTL is not None:
        read = subprocess.run(
            [KUBECTL, "--server", api[1], "--cache-dir", str(tmp_path / "cache"),
             "get", "node", NODE, "-o", "jsonpath={.metadata.annotations}"],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")},
        )  # fmt: skip
        assert read.returncode == 0, read.stderr
        seen = json.loads(read.stdout)
        assert seen[ann.STATE].startswith("fresh;at=")
        assert {ann.FULLNESS, ann.DIRECTIVES} <= set(seen)

    agent.send_signal(signal.SIGTERM)
    assert agent.wait(EXIT_S) == 0, agent_log.text()
    stop(coordinator, log, signal.SIGTERM)
    if KUBECTL is None:
        pytest.skip("kubectl is not on PATH: the independent read-back was not done")


def test_standalone_stops_cleanly_on_sigint(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    coordinator, log, _ = start_coordinator(processes, tmp_path)
    stop(coordinator, log, signal.SIGINT)
