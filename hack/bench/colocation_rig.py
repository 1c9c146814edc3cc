"""A node for colocation runs on the real kernel: a kubepods-like cgroup tree, busy pods in
it, and the real coordinator and agent processes enforcing on it.

Used by the end-to-end tests (tests/e2e) and by :mod:`hack.bench.colocation_latency`.

* :class:`PrivateTree` builds ``kubepods/{burstable,besteffort}/pod<uid>`` in a private
  subtree of each real hierarchy (v1 ``cpu`` and ``cpuacct``, the cgroup2 tree at
  ``unified``) and presents them through a temporary directory whose ``cpu``, ``cpuacct``
  and ``unified`` entries are symlinks to those subtrees, so ``--cgroup-root <dir>`` shows
  the agent a hybrid host with a cgroupfs kubepods tree and nothing else.
* :func:`spawn_be` / :func:`spawn_ls` start the pods' processes pinned to one CPU, so they
  contend for it: BE spins, LS runs a 50 % duty cycle (4 ms busy, 4 ms asleep) like a
  server answering requests, and stalls when BE holds the CPU as it wakes.
* :class:`Meter` measures what the kernel says happened over a window: each pod's CPU from
  ``cpuacct.usage`` deltas and its stall from the ``some total`` delta of its cgroup2
  ``cpu.pressure``.
* :class:`Stack` runs ``stowage coordinator --standalone`` (it serves the Kubernetes API
  emulator), registers pods there whose UIDs name the cgroups, and runs ``stowage agent``
  with ``--cgroup-root`` on the private tree and ``--pods-source apiserver``.

Everything created is removed by ``close()`` even when a run fails half-way: processes
killed, pods' processes moved back to each hierarchy's root, cgroups removed bottom-up.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, TypeVar

from hack.ports import free_port
from hack.waiting import until

T = TypeVar("T")

REPO: Final = Path(__file__).resolve().parents[2]
CGROUP_FS: Final = Path("/sys/fs/cgroup")
CONTROLLERS: Final = ("cpu", "cpuacct", "unified")
PREFIX: Final = "stowage-e2e-"
QOS_DIRS: Final = {"Burstable": "burstable", "BestEffort": "besteffort"}
LABEL_QOS: Final = "stowage.io/qos"
NODE: Final = "colocation-node"
NAMESPACE: Final = "default"
PERIOD_US: Final = 100_000
"""The CFS period kubelet leaves on pod cgroups (and a new cgroup has)."""
TREE_SHARES: Final = 8192
"""The private tree's ``cpu.shares`` against this machine's other tasks (1024 each), as
kubelet weighs kubepods against system daemons: runs watch BE against LS, not both
against whatever else shares the CPU."""
STOWAGE: Final = [sys.executable, "-m", "cli.main"]

BE_CODE: Final = "while True: pass"
LS_CODE: Final = """
import time
while True:
    end = time.perf_counter() + 0.004
    while time.perf_counter() < end:
        pass
    time.sleep(0.004)
"""


def unavailable() -> str | None:
    """Why no private tree can be built here (None: it can)."""
    if os.geteuid() != 0:
        return "not root: cgroups cannot be created"
    if not (CGROUP_FS / "cpu" / "cpu.cfs_quota_us").exists():
        return "no v1 cpu controller mounted at /sys/fs/cgroup/cpu"
    if not (CGROUP_FS / "cpuacct" / "cpuacct.usage").exists():
        return "no v1 cpuacct controller mounted at /sys/fs/cgroup/cpuacct"
    for name in CONTROLLERS:
        if not os.access(CGROUP_FS / name, os.W_OK):
            return f"/sys/fs/cgroup/{name} is not writable"
    if not (CGROUP_FS / "unified" / "cgroup.procs").exists():
        return "no cgroup2 tree at /sys/fs/cgroup/unified (per-cgroup PSI)"
    return None


class PrivateTree:
    """A kubepods tree of real cgroups that only this run uses."""

    def __init__(self) -> None:
        self.name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.root = Path(tempfile.mkdtemp(prefix=PREFIX))
        """What the agent gets as ``--cgroup-root``."""
        self.real = {c: CGROUP_FS / c / self.name for c in CONTROLLERS}

    def create(self) -> None:
        for controller, real in self.real.items():
            real.mkdir()
            (self.root / controller).symlink_to(real)
        (self.real["cpu"] / "cpu.shares").write_text(str(TREE_SHARES))
        for real in self.real.values():
            for rel in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
                (real / rel).mkdir()

    def pod(self, uid: str, qos_class: str) -> Pod:
        """Make the cgroups kubelet would make for this pod."""
        rel = f"kubepods/{QOS_DIRS[qos_class]}/pod{uid}"
        for real in self.real.values():
            (real / rel).mkdir()
        return Pod(uid, {c: real / rel for c, real in self.real.items()})

    def kubepods(self, controller: str = "cpu") -> Path:
        return self.real[controller] / "kubepods"

    def close(self) -> None:
        """Move every process left in the tree to the hierarchy's root and remove every
        cgroup, deepest first; then the temporary root."""
        for controller, real in self.real.items():
            if not real.exists():
                continue
            top = CGROUP_FS / controller / "cgroup.procs"
            dirs = sorted((p for p in real.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for cgroup in [*dirs, real]:
                _evacuate(cgroup, top)
                with contextlib.suppress(FileNotFoundError):
                    _rmdir(cgroup)
        shutil.rmtree(self.root, ignore_errors=True)


def _evacuate(cgroup: Path, top: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        for pid in (cgroup / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, OSError):
                top.write_text(pid)


def _rmdir(cgroup: Path) -> None:
    """rmdir a cgroup; a process that just exited can keep it busy for a moment."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            cgroup.rmdir()
            return
        except OSError as e:
            if e.errno == 2 or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


@dataclass(frozen=True)
class Pod:
    """One pod's cgroups, by hierarchy."""

    uid: str
    dirs: Mapping[str, Path]
    """``cpu``, ``cpuacct`` and ``unified``: the pod's real cgroup directory in each."""

    def join(self, pid: int) -> None:
        for cgroup in self.dirs.values():
            (cgroup / "cgroup.procs").write_text(str(pid))

    def read(self, controller: str, name: str) -> str:
        return (self.dirs[controller] / name).read_text().strip()

    def quota_us(self) -> int:
        return int(self.read("cpu", "cpu.cfs_quota_us"))

    def shares(self) -> int:
        return int(self.read("cpu", "cpu.shares"))

    def usage_ns(self) -> int:
        return int(self.read("cpuacct", "cpuacct.usage"))

    def stall_us(self) -> int:
        found = re.search(r"^some .*total=(\d+)$", self.read("unified", "cpu.pressure"), re.M)
        if found is None:
            raise ValueError(f"no 'some' line in {self.dirs['unified']}/cpu.pressure")
        return int(found[1])


CONFIG_FILES: Final = frozenset(
    {
        "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.cfs_burst_us", "cpu.shares", "cpu.idle",
        "cpu.rt_runtime_us", "cpu.rt_period_us", "cpu.max", "cpu.weight", "cpu.weight.nice",
        "cgroup.subtree_control", "cgroup.max.depth", "cgroup.max.descendants",
        "cgroup.freeze", "cgroup.type", "notify_on_release", "cgroup.clone_children",
    }
)  # fmt: skip
"""Every file a writer could change in the cpu, cpuacct and cgroup2 hierarchies."""


def snapshot(inside: Path | None = None, *, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """The settings files under ``inside`` (default: the cpu, cpuacct and cgroup2
    hierarchies) and their contents, leaving out the trees in ``skip``.

    Directories of other runs' private trees come and go while a run lasts, so a
    comparison should look at the paths both snapshots hold (see :func:`changed`).
    """
    roots = [inside] if inside is not None else [CGROUP_FS / c for c in CONTROLLERS]
    found: dict[str, str] = {}
    for root in roots:
        for here, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if Path(here, d) not in skip]
            for name in CONFIG_FILES.intersection(files):
                with contextlib.suppress(FileNotFoundError, OSError):
                    found[os.path.join(here, name)] = Path(here, name).read_text()
    return found


def changed(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Files in both snapshots whose contents differ, with both contents."""
    return {p: (before[p], after[p]) for p in before.keys() & after.keys() if before[p] != after[p]}


def contended_cpu() -> int:
    """The CPU both pods are pinned to: the last one this process may use."""
    return max(os.sched_getaffinity(0))


class Workers:
    """The pods' processes; ``close()`` kills whatever is left."""

    def __init__(self) -> None:
        self.procs: list[tuple[Pod, subprocess.Popen[bytes]]] = []

    def spawn(self, pod: Pod, code: str, cpu: int) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.procs.append((pod, proc))
        os.sched_setaffinity(proc.pid, {cpu})
        pod.join(proc.pid)
        return proc

    def kill(self, pod: Pod | None = None) -> None:
        """Kill the processes of ``pod`` (None: all) and wait for them."""
        chosen = [proc for owner, proc in self.procs if pod is None or owner is pod]
        for proc in chosen:
            if proc.poll() is None:
                proc.kill()
        for proc in chosen:
            proc.wait(10)

    def close(self) -> None:
        self.kill()


@dataclass(frozen=True)
class Window:
    """What the kernel accounted over one measuring window."""

    seconds: float
    cpu_m: Mapping[str, float]
    """Each pod's CPU use in millicores, by uid."""
    stall_pct: Mapping[str, float]
    """Each pod's ``some`` stall: the share of the window some of its tasks waited for a CPU."""

    def of(self, uid: str) -> PodWindow:
        """One pod's figures."""
        return PodWindow(self.cpu_m[uid], self.stall_pct[uid])


@dataclass(frozen=True)
class PodWindow:
    """One pod's CPU use (millicores) and stall (%) over a window."""

    cpu_m: float
    stall_pct: float


class Meter:
    """Deltas of the pods' kernel counters between two reads."""

    def __init__(self, pods: list[Pod]) -> None:
        self.pods = pods

    def _read(self) -> tuple[float, dict[str, int], dict[str, int]]:
        now = time.monotonic()
        return (
            now,
            {p.uid: p.usage_ns() for p in self.pods},
            {p.uid: p.stall_us() for p in self.pods},
        )

    def measure(self, seconds: float) -> Window:
        """Measure for ``seconds`` of wall time: the window is the measurement itself."""
        t0, use0, stall0 = self._read()
        time.sleep(seconds)
        t1, use1, stall1 = self._read()
        span = t1 - t0
        return Window(
            span,
            {u: (use1[u] - use0[u]) / 1e6 / span for u in use0},
            {u: (stall1[u] - stall0[u]) / 1e4 / span for u in stall0},
        )


def http(method: str, url: str, body: Any = None, content_type: str = "application/json") -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    return json.loads(text) if text.startswith(("{", "[")) else text


class Lines:
    """A process's stderr, read by a thread so the pipe never fills."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    def find(self, pattern: str) -> re.Match[str] | None:
        return next((m for line in list(self.lines) if (m := re.search(pattern, line))), None)

    def text(self) -> str:
        """All lines so far; once the process has ended, all it wrote (the reader gets a
        moment to drain the pipe)."""
        self._thread.join(5)
        return "".join(self.lines)


class Stack:
    """The real coordinator (standalone, with its API emulator) and the real agent."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[tuple[subprocess.Popen[str], Lines]] = []
        self.coordinator: subprocess.Popen[str] | None = None
        self.coordinator_log: Lines | None = None
        self.agent: subprocess.Popen[str] | None = None
        self.agent_log: Lines | None = None
        self.url = ""
        self.debug_url = ""
        """The coordinator's debug listener (``/debug/*``)."""
        self.api = ""
        self.token_file = ""

    def _launch(self, *args: str) -> tuple[subprocess.Popen[str], Lines]:
        env = {
            **os.environ,
            "NODE_NAME": NODE,
            "TMPDIR": str(self.workdir),
            "HOME": str(self.workdir),
        }
        proc = subprocess.Popen(
            [*STOWAGE, *args], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stderr is not None
        log = Lines(proc.stderr)
        self.procs.append((proc, log))
        return proc, log

    def start_coordinator(self, config: Mapping[str, Any] | None = None) -> None:
        """``stowage coordinator --standalone`` with ``config`` as its settings file (JSON is
        YAML); returns when it answers /readyz. Started again, it listens where it did."""
        listen = self.url.removeprefix("http://") or f"127.0.0.1:{free_port()}"
        debug = self.debug_url.removeprefix("http://") or f"127.0.0.1:{free_port()}"
        extra: list[str] = []
        if config is not None:
            path = self.workdir / "coordinator.yaml"
            path.write_text(json.dumps(config))
            extra = ["--config", str(path)]
        proc, log = self._launch(
            "coordinator", "--standalone", "--listen", listen, "--debug-listen", debug, *extra
        )
        self.coordinator, self.coordinator_log = proc, log

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"the coordinator exited:\n{log.text()}")
            api, token = log.find(r"emulated at (http://\S+)"), log.find(r"--token-file (\S+)")
            if not (api and token):
                return False
            self.api, self.token_file = api[1], token[1]
            try:
                return http("GET", f"http://{listen}/readyz") == "ready\n"
            except OSError:
                return False

        until(ready, "the coordinator ready")
        self.url, self.debug_url = f"http://{listen}", f"http://{debug}"

    def add_pod(self, name: str, *, qos_label: str | None, cpu_request: str | None) -> str:
        """Create a Running pod on the node in the emulator; returns its uid."""
        from hack.kubeapi import objects

        labels = {LABEL_QOS: qos_label} if qos_label else {}
        requests = {"cpu": cpu_request} if cpu_request else None
        body = objects.pod(name, NAMESPACE, node=NODE, labels=labels, requests=requests)
        base = f"{self.api}/api/v1/namespaces/{NAMESPACE}/pods"
        created = http("POST", base, {k: v for k, v in body.items() if k != "status"})
        created["status"] = body["status"]
        http("PUT", f"{base}/{name}/status", created)
        uid: str = created["metadata"]["uid"]
        return uid

    def kubeconfig(self) -> Path:
        path = self.workdir / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "e", "cluster": {"server": self.api}}],
                    "users": [{"name": "e", "user": {}}],
                    "contexts": [{"name": "e", "context": {"cluster": "e", "user": "e"}}],
                    "current-context": "e",
                }
            )
        )
        return path

    def start_agent(self, cgroup_root: Path, *extra: str, interval_s: float = 0.5) -> None:
        proc, log = self._launch(
            "agent", "--coordinator", self.url, "--token-file", self.token_file,
            "--node-name", NODE, "--interval", str(interval_s), "--jitter", "0",
            "--cgroup-root", str(cgroup_root), "--pods-source", "apiserver",
            "--kubeconfig", str(self.kubeconfig()),
            "--enforce", "--enforcer-journal", str(self.workdir / "enforcer-journal.json"),
            *extra,
        )  # fmt: skip
        self.agent, self.agent_log = proc, log

    def reports_accepted(self) -> float:
        """The coordinator's count of accepted reports (0 before the first)."""
        text = http("GET", f"{self.url}/metrics")
        found = re.search(r'^stowage_reports_total\{outcome="accepted"\} (\S+)$', text, re.M)
        return float(found[1]) if found else 0.0

    def colocation(self) -> dict[str, Any]:
        """``/debug/colocation`` for the node: the coordinator's throttle and its reason."""
        found: dict[str, Any] = http("GET", f"{self.debug_url}/debug/colocation?node={NODE}")
        return found

    def node_annotations(self) -> dict[str, str]:
        """The node's annotations as the emulated API server holds them."""
        found: dict[str, str] = (
            http("GET", f"{self.api}/api/v1/nodes/{NODE}")["metadata"].get("annotations") or {}
        )
        return found

    def coordinator_process(self) -> subprocess.Popen[str]:
        assert self.coordinator is not None, "no coordinator started"
        return self.coordinator

    def agent_process(self) -> subprocess.Popen[str]:
        assert self.agent is not None, "no agent started"
        return self.agent

    def stop(self, proc: subprocess.Popen[str] | None, signum: int = signal.SIGTERM) -> int:
        """Signal one process and wait for it; its exit code."""
        assert proc is not None
        proc.send_signal(signum)
        return proc.wait(20)

    def close(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc, _ in self.procs:
            proc.wait(10)
            if proc.stderr is not None:
                proc.stderr.close()


@contextlib.contextmanager
def node(workdir: Path) -> Iterator[tuple[PrivateTree, Workers, Stack]]:
    """A private cgroup tree, a place for workers and the stack; all removed at the end."""
    tree = PrivateTree()
    workers = Workers()
    stack = Stack(workdir)
    try:
        tree.create()
        yield tree, workers, stack
    finally:
        try:
            stack.close()
            workers.close()
        finally:
            tree.close()
