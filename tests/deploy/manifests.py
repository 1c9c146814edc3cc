"""The Kustomize trees under ``daemonset/``, rendered the way an operator applies them.

Every directory holding a ``kustomization.yaml`` is found by a glob, so a tree someone adds
is rendered and checked without being listed here. A Kustomize *Component* cannot be built
on its own; it is rendered on top of ``daemonset/base``, the way its comment says to use it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DAEMONSET = REPO / "daemonset"
BASE = DAEMONSET / "base"
NAMESPACE = "stowage-system"

Obj = Mapping[str, Any]


def kustomizations() -> list[Path]:
    """Every kustomization directory under daemonset/, sorted."""
    return sorted(p.parent for p in DAEMONSET.rglob("kustomization.yaml"))


def label(directory: Path) -> str:
    return str(directory.relative_to(REPO))


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl not installed (it renders the kustomizations)")
    return found


def is_component(directory: Path) -> bool:
    text = (directory / "kustomization.yaml").read_text()
    return yaml.safe_load(text).get("kind") == "Component"


@functools.cache
def render(directory: Path) -> tuple[Obj, ...]:
    """The objects ``kubectl kustomize`` builds from ``directory`` (a Component on the base)."""
    if not is_component(directory):
        return _build(directory)
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [os.path.relpath(BASE, tmp)],
            "components": [os.path.relpath(directory, tmp)],
        }
        (Path(tmp) / "kustomization.yaml").write_text(yaml.safe_dump(wrapper))
        return _build(Path(tmp))


def _build(directory: Path) -> tuple[Obj, ...]:
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, f"kubectl kustomize {directory}: {result.stderr.strip()}"
    return tuple(o for o in yaml.safe_load_all(result.stdout) if o)


def find(objects: tuple[Obj, ...], kind: str, name: str) -> Obj:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def containers(obj: Obj) -> Iterator[Obj]:
    """The containers (init containers too) of a workload's pod template."""
    spec = obj["spec"]["template"]["spec"]
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def workloads(objects: tuple[Obj, ...]) -> Iterator[Obj]:
    return (o for o in objects if o["kind"] in ("Deployment", "DaemonSet", "StatefulSet"))
