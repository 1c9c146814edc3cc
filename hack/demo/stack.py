"""What the demo runs: the API emulator, the coordinator and this machine's agent.

The emulator serves from a thread of this process (seeded directly, as a cluster's
nodes would have registered), on a fixed port so the kubeconfig written for it stays
valid while the demo runs. The coordinator and the agent are the real programs (``stowage
coordinator --kubeconfig``, ``stowage agent``) in their own processes: the coordinator
talks to the emulator through the same client code as to a cluster, and the agent sends
this machine's reports to it with a token the emulator's TokenReview accepts. Their logs
go to files in the run's directory; a coordinator that stops before serving (a busy
port) has its own one-line error shown.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from coordinator.config import CoordinatorSettings
from coordinator.state.cluster import NodeSpec
from hack.demo.httpjson import DemoError
from hack.demo.workload import node_fields
from hack.kubeapi import KubeApi
from hack.thismachine import agent_token_file

ROOT: Final = Path(__file__).resolve().parents[2]
AGENT_INTERVAL_S: Final = 2.0
STARTUP_S: Final = 60.0
"""Longest wait for the coordinator to serve (it takes seconds to import and start)."""


class Refused(DemoError):
    """A part of the demo could not start (a busy port): the message says why, or is
    empty where that part's own line said it already."""


@dataclass
class Stack:
    """What is running: the emulator (its URL for the API), where the coordinator serves
    (its main and its debug listener), the kubeconfig written for ``kubectl``, and this
    machine's node name."""

    api: KubeApi
    coordinator_url: str
    debug_url: str
    kubeconfig: Path
    node: str


@contextlib.contextmanager
def running(
    nodes: Sequence[NodeSpec], out: Path, api_port: int, coordinator_port: int, debug_port: int
) -> Iterator[Stack]:
    """Start everything (``nodes`` seeded, the last one being this machine), stop it all
    on the way out; :class:`Refused` if a part cannot start."""
    settings = CoordinatorSettings()
    with contextlib.ExitStack() as stack:
        try:
            api = stack.enter_context(KubeApi.in_thread(port=api_port))
        except OSError as e:
            raise Refused(
                f"127.0.0.1:{api_port}: {e.strerror or e} (--api-port picks another)"
            ) from e
        api.add_namespace(settings.kube.namespace)
        for spec in nodes:
            api.add_node(spec.name, **node_fields(spec))
        node = nodes[-1].name
        token_file = agent_token_file(api, node, settings, out)
        kubeconfig = api.kubeconfig(out / "kubeconfig")
        url = f"http://127.0.0.1:{coordinator_port}"
        stowage = [sys.executable, "-m", "cli.main"]
        # The agent starts alongside (it retries until the coordinator listens, within a
        # second): both take seconds to import.
        agent = stack.enter_context(
            _process(
                [*stowage, "agent", "--coordinator", url, "--token-file", str(token_file),
                 "--node-name", node, "--interval", str(AGENT_INTERVAL_S),
                 "--pods-source", "none"],
                out / "agent.log",
            )
        )  # fmt: skip
        coordinator = stack.enter_context(
            _process(
                [*stowage, "coordinator", "--kubeconfig", str(kubeconfig),
                 "--listen", f"127.0.0.1:{coordinator_port}",
                 "--debug-listen", f"127.0.0.1:{debug_port}"],
                out / "coordinator.log",
                ready=re.compile(r"serving on"),
            )
        )  # fmt: skip
        # On the way out both are asked to stop at once, then waited for one by one.
        stack.callback(lambda: [p.terminate() for p in (agent, coordinator) if p.poll() is None])
        yield Stack(api, url, f"http://127.0.0.1:{debug_port}", kubeconfig, node)


@contextlib.contextmanager
def _process(
    command: list[str], log: Path, ready: re.Pattern[str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """Run ``command`` with its output in ``log``; with ``ready``, first wait (at most
    :data:`STARTUP_S`) for a line matching it on stderr — :class:`Refused` if the process
    ends before one (its output, which says why, shown) or does not print one in time.
    Stopped with SIGTERM (SIGKILL after 10 s) on the way out."""
    with (
        log.open("w") as sink,
        subprocess.Popen(command, cwd=ROOT, stdout=sink, stderr=subprocess.PIPE, text=True) as proc,
    ):
        assert proc.stderr is not None
        drain = threading.Thread(target=_drain, args=(proc.stderr, sink), daemon=True)
        try:
            if ready is not None:
                _await(proc, ready, sink, log)
            drain.start()
            yield proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if drain.is_alive():
                drain.join(5)  # the rest of its output, before the pipe is closed


def _await(proc: subprocess.Popen[str], ready: re.Pattern[str], sink: IO[str], log: Path) -> None:
    """Wait for ``proc``'s ready line (see :func:`_process`)."""
    late = threading.Event()

    def give_up() -> None:
        late.set()
        proc.kill()

    timer = threading.Timer(STARTUP_S, give_up)
    timer.start()
    try:
        assert proc.stderr is not None
        if _wait_for(proc.stderr, ready, sink):
            return
    finally:
        timer.cancel()
    proc.wait(15)  # its output ended: it is ending
    if late.is_set():
        raise Refused(f"{log.stem} did not start serving in {STARTUP_S:g} s (its log: {log})")
    sys.stderr.write(log.read_text())
    raise Refused("")  # its own output (shown) says why


def _wait_for(stream: IO[str], ready: re.Pattern[str], sink: IO[str]) -> bool:
    """Copy lines to ``sink`` until one matches ``ready`` (True) or the stream ends."""
    for line in stream:
        sink.write(line)
        sink.flush()
        if ready.search(line):
            return True
    return False


def _drain(stream: IO[str], sink: IO[str]) -> None:
    """Keep copying the process's stderr to its log (it would block once the pipe fills)."""
    with contextlib.suppress(ValueError):  # the log was closed: the demo is ending
        for line in stream:
            sink.write(line)
            sink.flush()
