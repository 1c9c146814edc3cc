"""The real ``stowage coordinator`` as a process against the real control plane."""

from __future__ import annotations

import contextlib
import sys
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml
from prometheus_client.parser import text_string_to_metric_families

from hack.cluster.controlplane import ControlPlane, Program, wait_until
from hack.ports import free_port

REPO: Final = Path(__file__).resolve().parents[2]
STOWAGE: Final = [sys.executable, "-m", "cli.main"]
NAMESPACE: Final = "stowage-system"
SERVICE_ACCOUNT: Final = "stowage-coordinator"
AGENT_SERVICE_ACCOUNT: Final = "stowage-agent"


@contextlib.contextmanager
def running(
    plane: ControlPlane,
    kubeconfig: Path,
    settings: Mapping[str, Any],
    name: str = "coordinator",
    extra: Sequence[str] = (),
    port: int | None = None,
    debug_port: int | None = None,
) -> Iterator[tuple[Program, str]]:
    """``stowage coordinator --kubeconfig`` with ``settings`` as its YAML config and
    ``extra`` arguments, on ``port`` of 127.0.0.1 and its ``/debug`` and ``/ui`` on
    ``debug_port`` (free ones by default: replicas run side by side); yields the
    process and its URL once it is ready (``/readyz``: its Node and Pod caches listed;
    :class:`ControlPlaneError` with its log if it exits first).
    Stopped (SIGTERM, then SIGKILL) on the way out."""
    port = port or free_port()
    path = plane.root / f"{name}-{port}.yaml"
    path.write_text(yaml.safe_dump(dict(settings)))
    url = f"http://127.0.0.1:{port}"
    argv = [*STOWAGE, "coordinator", "--kubeconfig", str(kubeconfig), "--config", str(path),
            "--listen", f"127.0.0.1:{port}",
            "--debug-listen", f"127.0.0.1:{debug_port or free_port()}", *extra]  # fmt: skip
    program = plane.start(f"{name}-{port}", argv, cwd=REPO)
    try:
        wait_until(lambda: _answers(url + "/readyz"), f"{name} ready", program)
        yield program, url
    finally:
        program.stop()


def _answers(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)


def metric(url: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """One sample of the coordinator's ``/metrics`` (0 when it has none yet)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(
                sample.labels.get(k) == v for k, v in (labels or {}).items()
            ):
                return float(sample.value)
    return 0.0
