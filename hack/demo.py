"""The whole system on one machine, no cluster needed: ``make run``.

Starts ``stowage coordinator --standalone`` (a Kubernetes API emulator holding this
machine as a node), then this machine's ``stowage agent`` reporting to it every few
seconds with the token the coordinator issued, and prints the node's ``stowage.io/``
annotations as ``kubectl`` would read them whenever they change. Ctrl-C stops both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--interval", type=float, default=5.0, help="agent report period")
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (0: never)")
    args = parser.parse_args(argv)
    node = os.environ.get("NODE_NAME") or socket.gethostname()
    stowage = [sys.executable, "-m", "cli.main"]
    coordinator = subprocess.Popen(
        [*stowage, "coordinator", "--standalone", "--listen", f"127.0.0.1:{args.port}"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    agent = None
    try:
        banner = _wait_for_banner(coordinator)
        if banner is None:  # it printed why (a busy port: one line naming the address)
            return coordinator.wait(15) or 1
        token_file, api = banner
        agent = subprocess.Popen(
            [*stowage, "agent", "--coordinator", f"http://127.0.0.1:{args.port}",
             "--token-file", token_file, "--node-name", node, "--interval", str(args.interval),
             "--pods-source", "none"],
            cwd=ROOT,
        )  # fmt: skip
        print(f"coordinator on http://127.0.0.1:{args.port}, Kubernetes API emulated at {api}")
        print(f"watching node {node} (kubectl --server {api} get node {node} -o yaml)\n")
        _watch(api, node, args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        for proc in (agent, coordinator):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in (agent, coordinator):
            if proc is not None:
                proc.wait(15)
    return 0


def _wait_for_banner(coordinator: subprocess.Popen[str]) -> tuple[str, str] | None:
    """The token file and API URL the standalone coordinator prints on start; None when
    it stopped before serving (its own error, already forwarded, says why)."""
    token_file = api = ""
    assert coordinator.stderr is not None
    for line in coordinator.stderr:
        sys.stderr.write(line)
        if m := re.search(r"emulated at (http://\S+)", line):
            api = m.group(1)
        if m := re.search(r"--token-file (\S+)", line):
            token_file = m.group(1)
        if "serving on" in line:
            # Keep forwarding its log, or it would block once the pipe fills.
            threading.Thread(target=_forward, args=(coordinator.stderr,), daemon=True).start()
            return token_file, api
    return None


def _forward(stream: Any) -> None:
    for line in stream:
        sys.stderr.write(line)


def _watch(api: str, node: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds if seconds else float("inf")
    shown: dict[str, str] = {}
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{api}/api/v1/nodes/{node}", timeout=5) as response:
            found = json.load(response)["metadata"].get("annotations") or {}
        current = {k: v for k, v in found.items() if k.startswith("stowage.io/")}
        if current != shown:
            print(time.strftime("%H:%M:%S"), json.dumps(current, indent=2), flush=True)
            shown = current
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
