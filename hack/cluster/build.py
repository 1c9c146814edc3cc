"""Build the real control plane's programs from source, once per change of what pins them.

The Go modules beside this file pin one Kubernetes release (kube-apiserver,
kube-controller-manager, kube-scheduler), etcd's server and kwok. Building them takes
minutes on a small machine, so the binaries are kept in a per-user cache under a *stamp*:
a digest of the modules' files, the Go toolchain's version and the link flags. An unchanged
tree finds its stamp and builds nothing; any edit to a ``go.mod``/``go.sum``/``main.go``
or a new Go makes a new stamp (and Go's own build cache still makes that rebuild fast).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
KUBERNETES_RELEASE: Final = "v1.37.2"
ETCD_RELEASE: Final = "v3.7.3"
KWOK_RELEASE: Final = "v0.8.0"
_MAJOR, _MINOR = KUBERNETES_RELEASE.lstrip("v").split(".")[:2]
# The binaries would otherwise say v0.0.0-master: clients and tests read the version.
_K8S_VERSION_FLAGS: Final = " ".join(
    f"-X k8s.io/component-base/version.{name}={value}"
    for name, value in (
        ("gitVersion", KUBERNETES_RELEASE),
        ("gitMajor", _MAJOR),
        ("gitMinor", _MINOR),
    )
)
PROGRESS_EVERY_S: Final = 20.0


class BuildError(RuntimeError):
    """The control plane could not be built; the message says what was missing or failed."""


@dataclass(frozen=True)
class Target:
    """One ``go build`` run: the module directory, the packages and the binaries they give;
    ``files`` are written from the module beside them after the build (see ``_FILES``)."""

    module: Path
    packages: tuple[str, ...]
    binaries: tuple[str, ...]
    ldflags: str = "-s -w"
    files: tuple[str, ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.binaries + self.files


# kwok's own Stage objects for API-only nodes and their pods, as its "fast" kustomizations
# ship them: nodes become Ready and keep a Lease heartbeat; bound pods become Running; pods
# being deleted are confirmed gone (a kubelet's part in eviction); finished pods complete.
KWOK_STAGES: Final = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


TARGETS: Final = (
    Target(
        HERE,
        tuple(
            f"k8s.io/kubernetes/cmd/{name}"
            for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
        ),
        ("kube-apiserver", "kube-controller-manager", "kube-scheduler"),
        f"-s -w {_K8S_VERSION_FLAGS}",
    ),
    Target(HERE / "etcd", (".",), ("etcd",)),
    Target(HERE / "kwok", ("sigs.k8s.io/kwok/cmd/kwok",), ("kwok",), files=("kwok-stages.yaml",)),
)
OUTPUTS: Final = tuple(name for target in TARGETS for name in target.outputs)


def cache_root() -> Path:
    """Where built control planes live: ``$STOWAGE_CONTROL_PLANE_CACHE``, else the user's
    cache directory (``$XDG_CACHE_HOME`` or ``~/.cache``) under ``stowage/control-plane``."""
    if explicit := os.environ.get("STOWAGE_CONTROL_PLANE_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stowage" / "control-plane"


def go_binary() -> str:
    """The ``go`` command, or :class:`BuildError` naming what to install."""
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "go not found on PATH: the real control plane is built from source with Go >= 1.26"
            " (https://go.dev/dl/)"
        )
    return go


def stamp(go: str) -> str:
    """The digest that names one build: every file that pins a module, the Go version and
    the link flags. Equal stamps mean equal binaries."""
    digest = hashlib.sha256()
    version = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True)
    digest.update(version.stdout.strip().encode())
    for target in TARGETS:
        digest.update(target.ldflags.encode())
        for path in sorted(target.module.glob("*")):
            if path.is_file() and (path.suffix == ".go" or path.name in ("go.mod", "go.sum")):
                digest.update(path.name.encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def built(root: Path | None = None) -> Path | None:
    """The binaries' directory when this tree's control plane is already built, else None."""
    bin_dir = (root or cache_root()) / stamp(go_binary()) / "bin"
    return bin_dir if all((bin_dir / name).is_file() for name in OUTPUTS) else None


def ensure_built(root: Path | None = None, say: Callable[[str], None] | None = None) -> Path:
    """Build whatever of the control plane is missing for this tree and return the directory
    holding ``kube-apiserver``, ``kube-controller-manager``, ``kube-scheduler``, ``etcd`` and
    ``kwok``. Progress lines go to ``say`` (stderr by default). Two processes building at once
    wait for each other (a lock in the cache) instead of building twice."""
    say = say or _stderr
    go = go_binary()
    bin_dir = (root or cache_root()) / stamp(go) / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    with _locked(bin_dir.parent / "lock"):
        todo = [t for t in TARGETS if not all((bin_dir / name).is_file() for name in t.outputs)]
        if not todo:
            return bin_dir
        say(
            f"building the control plane (Kubernetes {KUBERNETES_RELEASE}, etcd {ETCD_RELEASE},"
            f" kwok {KWOK_RELEASE}) into {bin_dir}; a first build takes minutes"
        )
        started = time.monotonic()
        for target in todo:
            _build(go, target, bin_dir, say)
        say(f"control plane built in {time.monotonic() - started:.0f} s")
    return bin_dir


def _build(go: str, target: Target, bin_dir: Path, say: Callable[[str], None]) -> None:
    """One ``go build -v`` into a scratch directory, then the binaries moved into place (a
    build cut short leaves nothing that looks built). Every :data:`PROGRESS_EVERY_S` a line
    says how many packages were compiled so far."""
    names = ", ".join(target.binaries)
    scratch = bin_dir.parent / f"scratch-{os.getpid()}"
    scratch.mkdir(exist_ok=True)
    started = time.monotonic()
    say(f"  {names}: go build ...")
    command = [go, "build", "-v", "-trimpath", f"-ldflags={target.ldflags}", "-o", f"{scratch}/"]
    if target.packages == (".",):  # a main package of our own: name the output file
        command[-1] = str(scratch / target.binaries[0])
    env = {
        **os.environ,
        "GOFLAGS": os.environ.get("GOFLAGS", "-buildvcs=false"),
        "CGO_ENABLED": "0",
    }
    log: list[str] = []
    packages = 0
    last = started
    with subprocess.Popen(
        [*command, *target.packages],
        cwd=target.module,
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.rstrip()
            if line and not line.startswith(("go: downloading", "#")) and " " not in line:
                packages += 1  # -v names each package as it is compiled
            else:
                log.append(line)
            if time.monotonic() - last >= PROGRESS_EVERY_S:
                last = time.monotonic()
                say(f"  {names}: {packages} packages compiled, {last - started:.0f} s")
    if proc.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        tail = "\n".join(log[-30:])
        raise BuildError(
            f"go build of {names} in {target.module} failed ({proc.returncode}):\n{tail}"
        )
    if "kwok-stages.yaml" in target.files:
        _write_kwok_stages(go, target, scratch / "kwok-stages.yaml")
    for name in target.outputs:
        os.replace(scratch / name, bin_dir / name)
    shutil.rmtree(scratch, ignore_errors=True)
    say(f"  {names}: built in {time.monotonic() - started:.0f} s")


def _write_kwok_stages(go: str, target: Target, path: Path) -> None:
    """The :data:`KWOK_STAGES` of the kwok module this build used, as one multi-document
    file for ``kwok --config``."""
    found = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=target.module,
        capture_output=True,
        text=True,
        check=True,
    )
    module = Path(found.stdout.strip())
    path.write_text(
        "\n---\n".join((module / stage).read_text().strip() for stage in KWOK_STAGES) + "\n"
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
