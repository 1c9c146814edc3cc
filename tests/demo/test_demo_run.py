"""``python -m hack.demo`` end to end, as ``make run`` starts it: a small run through real
HTTP (the API emulator, the coordinator and the agent as processes), read from outside —
its output, its files, and ``kubectl`` pointed at the kubeconfig it writes."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from hack.demo.main import NODE_LIST, POD_LIST
from tests.kit import free_port
from tests.sim.simfiles import need

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def demo_args(out: Path, *extra: str) -> list[str]:
    need(NODE_LIST)
    need(POD_LIST)
    return [
        sys.executable, "-m", "hack.demo", "--nodes", "5", "--pods", "30",
        "--port", str(free_port()), "--api-port", str(free_port()),
        "--debug-port", str(free_port()), "--out", str(out), *extra,
    ]  # fmt: skip


def kubectl(config: Path, *args: str) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(config), *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_small_run_ends_by_itself_with_both_columns_a_png_and_a_kubeconfig(tmp_path):
    result = subprocess.run(
        demo_args(tmp_path), capture_output=True, text=True, timeout=120, cwd=REPO, env=ENV
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Traceback" not in result.stderr
    header = next(line for line in out.splitlines() if "default scoring" in line)
    assert header.split() == ["default", "scoring", "with", "Stowage"]
    rows = {
        line.split("  ")[0]: line
        for line in out.splitlines()
        if line.startswith(("pods placed", "pods pending", "GPU fragmentation", "unallocated"))
    }
    assert len(rows) == 4
    placed = re.findall(r"(\d+) / 30", rows["pods placed"])
    assert len(placed) == 2  # one count per column, each of the 30 pods
    assert re.search(r"agent \(.+\): [1-9]\d* reports accepted", out)
    png = Path(re.search(r"plot: (\S+)", out).group(1))
    assert png.read_bytes()[:8] == PNG_MAGIC
    config = Path(re.search(r"kubectl --kubeconfig (\S+) get nodes", out).group(1))
    assert yaml.safe_load(config.read_text())["current-context"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_keep_stays_up_for_kubectl_and_schedules_a_pod_created_with_it(tmp_path):
    args = demo_args(tmp_path, "--keep")
    with subprocess.Popen(
        args,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=ENV,
    ) as proc:  # fmt: skip
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
        errors: list[str] = []
        threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True).start()
        try:
            _check_kubectl_sees_and_places(lines, tmp_path)
        finally:
            # SIGTERM, as `timeout` or `kill` sends: the same way out as Ctrl-C (and a SIGINT
            # would be ignored where pytest itself runs in a background job).
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
    assert code == 0, "".join(errors)
    with pytest.raises(ConnectionRefusedError):  # the coordinator it started stopped too
        socket.create_connection(("127.0.0.1", int(args[args.index("--port") + 1]))).close()


def _check_kubectl_sees_and_places(lines: queue.Queue[str], tmp_path: Path) -> None:
    seen = _wait_for(lines, "Ctrl-C stops them")
    assert "with Stowage" in seen
    config = Path(re.search(r"kubectl --kubeconfig (\S+) get nodes", seen).group(1))
    pods = json.loads(kubectl(config, "get", "pods", "-o", "json"))["items"]
    assert len(pods) == 30
    nodes = {
        n["metadata"]["name"]
        for n in json.loads(kubectl(config, "get", "nodes", "-o", "json"))["items"]
    }
    on = {p["spec"].get("nodeName") for p in pods} - {None}
    assert on and on <= nodes  # the replay's pods are bound to the cluster's nodes
    manifest = tmp_path / "mine.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: mine}\nspec:\n  containers:\n"
        "  - {name: c, image: busybox, resources: {requests: {cpu: 100m, memory: 64Mi}}}\n"
    )
    kubectl(config, "apply", "-f", str(manifest))
    kubectl(config, "wait", "--for=condition=PodScheduled", "pod/mine", "--timeout=30s")
    node = kubectl(config, "get", "pod", "mine", "-o", "jsonpath={.spec.nodeName}")
    assert node in nodes
    _wait_for(lines, f"default/mine: bound to {node}")


def test_a_busy_api_port_is_one_error_line_and_exit_2(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        args = demo_args(tmp_path)
        args[args.index("--api-port") + 1] = str(port)
        result = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=REPO, env=ENV)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"stowage demo: error: 127.0.0.1:{port}: Address already in use (--api-port picks another)"
    ]


def test_stopped_while_it_reads_the_trace_it_says_so_without_a_traceback(tmp_path):
    trace = tmp_path / "trace"
    trace.mkdir()
    nodes = trace / "openb_node_list_gpu_node.csv"
    os.mkfifo(nodes)  # reading it waits for a writer: the demo is held mid-read
    args = [sys.executable, "-m", "hack.demo", "--trace", str(trace), "--out", str(tmp_path)]
    # Should the demo never open it, a reader of our own ends the wait below after 60 s.
    unblock = threading.Timer(60, lambda: os.close(os.open(nodes, os.O_RDONLY | os.O_NONBLOCK)))
    unblock.start()
    with (
        subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=ENV
        ) as proc,
        open(nodes, "w"),  # returns once the demo has opened it to read
    ):
        unblock.cancel()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert (proc.returncode, err) == (130, "stopped\n")


def _wait_for(lines: queue.Queue[str], text: str, timeout_s: float = 90) -> str:
    """Everything the process printed up to the first line containing ``text``."""
    seen = []
    while True:
        line = lines.get(timeout=timeout_s)
        seen.append(line)
        if text in line:
            return "".join(seen)
