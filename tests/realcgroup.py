"""A private kubepods tree in this machine's real cgroup hierarchy, removed after the test.

Enforcement is only proven on the real kernel: a quota the kernel refuses or ignores
passes any test written against plain files. This builds ``<unique>/kubepods/...``
under each real controller it finds writable (v1 ``cpu``, ``cpuacct``, and the cgroup2
tree of a hybrid host for per-cgroup PSI) and shows it to :func:`agent.cgroups.detect`
through a temporary root whose ``cpu`` (``cpuacct``, ``unified``) entries are symlinks
to those private directories. Code under test therefore sees an ordinary host layout
while writing the real ``cpu.cfs_quota_us`` files, and the host's own cgroups are never
touched.

Cleanup runs even when the test fails: processes started here are killed, any process
still inside the tree is moved back to the cgroup this test process is in, and every
directory created is removed deepest first.

Use: ``pytest_plugins`` in ``tests/conftest.py`` registers the ``real_cgroup_tree``
fixture (cgroupfs driver; ``@pytest.mark.parametrize("real_cgroup_tree", ["systemd"],
indirect=True)`` for the systemd one). Skips, naming what is missing, where no writable
cgroup v1 ``cpu`` controller exists.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import cgroups

CGROUP_ROOT = Path("/sys/fs/cgroup")
_BUSY = "while True:\n    pass\n"


def writable_cpu_controller() -> Path | None:
    """The real cgroup v1 ``cpu`` controller mount, if this process may create cgroups there."""
    for name in ("cpu", "cpu,cpuacct"):
        path = CGROUP_ROOT / name
        if (path / "cpu.cfs_quota_us").exists() and os.access(path, os.W_OK):
            return path
    return None


class RealCgroupTree:
    """A kubepods tree (cgroupfs or systemd names) inside the real cgroup hierarchy."""

    def __init__(self, tmp: Path, driver: str = "cgroupfs") -> None:
        cpu = writable_cpu_controller()
        if cpu is None:
            pytest.skip("no writable cgroup v1 cpu controller under /sys/fs/cgroup (needs root)")
        self.driver = driver
        self.name = f"stowage-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.root = tmp / "cgroup"
        """The root to hand to ``cgroups.detect`` / ``CgroupLayout``."""
        self.root.mkdir()
        self._real: dict[str, Path] = {}
        self._created: list[Path] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._cpu_mount = cpu
        self.layout: cgroups.CgroupLayout

    def build(self) -> None:
        """Create the private directories and the kubepods tree (cleanup() undoes any part).

        Mirrored: ``cpu`` limits, ``cpuacct`` measures usage (its own mount on some hosts),
        ``unified`` (the cgroup2 tree of a hybrid host) carries per-cgroup PSI.
        """
        for link, real_mount in (
            ("cpu", self._cpu_mount),
            ("cpuacct", CGROUP_ROOT / "cpuacct"),
            ("unified", CGROUP_ROOT / "unified"),
        ):
            base = real_mount / self.name
            if not (real_mount / "cgroup.procs").exists():
                continue
            try:
                base.mkdir()
            except OSError:
                if link == "cpu":
                    raise
                continue  # an optional controller this host will not let us use
            self._created.append(base)
            self._real[link] = base
            (self.root / link).symlink_to(base, target_is_directory=True)
        qos_names = (
            ("kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice")
            if self.driver == "systemd"
            else ("kubepods", "burstable", "besteffort")
        )
        self.mkdir(qos_names[0])
        for qos in qos_names[1:]:
            self.mkdir(f"{qos_names[0]}/{qos}")
        layout = cgroups.detect(self.root)
        assert layout is not None and layout.driver == self.driver
        self.layout = layout

    @property
    def controllers(self) -> tuple[str, ...]:
        """The controllers mirrored on this host (``cpu`` always)."""
        return tuple(self._real)

    def mkdir(self, relative: str) -> Path:
        """Create ``relative`` (below the private root) in each controller; its cpu path."""
        for base in self._real.values():
            path = base / relative
            if not path.exists():
                path.mkdir()
                self._created.append(path)
        return self.root / "cpu" / relative

    def pod(self, uid: str, qos_class: str = "BestEffort") -> Path:
        """Create a pod's cgroup where kubelet would; its directory under the cpu controller."""
        path = self.layout.pod_dir(qos_class, uid, "cpu")
        assert path is not None, f"malformed uid {uid!r}"
        return self.mkdir(str(path.relative_to(self.root / "cpu")))

    def real_path(self, controller: str, relative: str | Path) -> Path:
        """The real kernel path of ``relative`` in one mirrored controller."""
        return self._real[controller] / relative

    def move(self, pid: int, cpu_dir: Path) -> None:
        """Move a process into the cgroup ``cpu_dir`` names, in every mirrored controller."""
        relative = cpu_dir.relative_to(self.root / "cpu")
        for base in self._real.values():
            (base / relative / "cgroup.procs").write_text(f"{pid}\n")

    def busy(self, cpu_dir: Path) -> subprocess.Popen[bytes]:
        """Start a process that spins on one CPU and move it into ``cpu_dir``."""
        proc = subprocess.Popen([sys.executable, "-c", _BUSY])
        self._procs.append(proc)
        self.move(proc.pid, cpu_dir)
        return proc

    def cleanup(self) -> None:
        """Kill what was started, evacuate stragglers, remove every cgroup created."""
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
        for path in reversed(self._created):
            _evacuate(path)
            with contextlib.suppress(FileNotFoundError):
                path.rmdir()


def _evacuate(path: Path) -> None:
    """Move any process left in ``path`` to the cgroup this process lives in (same mount)."""
    try:
        pids = (path / "cgroup.procs").read_text().split()
    except FileNotFoundError:
        return
    if not pids:
        return
    mount = next(p for p in (CGROUP_ROOT / c for c in os.listdir(CGROUP_ROOT)) if p in path.parents)
    home = mount / _own_cgroup(mount).lstrip("/")
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, OSError):
            (home / "cgroup.procs").write_text(f"{pid}\n")
        if int(pid) != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def _own_cgroup(mount: Path) -> str:
    """This process's cgroup path in the hierarchy mounted at ``mount``."""
    options = set(mount.name.split(","))
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        names = set(controllers.split(",")) if controllers else {"unified"}
        if options & names:
            return path
    return "/"


@pytest.fixture
def real_cgroup_tree(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RealCgroupTree]:
    """A private kubepods tree in the real cgroup hierarchy (driver from indirect param)."""
    tree = RealCgroupTree(tmp_path, getattr(request, "param", "cgroupfs"))
    try:
        tree.build()
        yield tree
    finally:
        tree.cleanup()
