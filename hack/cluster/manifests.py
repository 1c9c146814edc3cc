"""The RBAC Stowage ships (``daemonset/``), read the way ``kubectl kustomize`` renders it,
for applying to a control plane without kubectl.

Only what these kustomizations use is followed: ``resources`` (files and directories)
and ``namespace`` (set on every namespaced object and on the ServiceAccount subjects of
bindings that name none, as kustomize's namespace transformer does). A test holds the
result to ``kubectl kustomize``'s own rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

REPO: Final = Path(__file__).resolve().parents[2]
DAEMONSET: Final = REPO / "daemonset"
RBAC_KINDS: Final = frozenset(
    {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
)
CLUSTER_SCOPED: Final = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding"})
COORDINATOR_AND_AGENT: Final = DAEMONSET / "base"
SECOND_SCHEDULER: Final = DAEMONSET / "scheduler" / "second-scheduler"


def rbac(directory: Path) -> list[dict[str, Any]]:
    """The namespaces, ServiceAccounts and RBAC objects the kustomization in ``directory``
    renders, in its order."""
    return [o for o in _objects(directory, None) if o["kind"] in RBAC_KINDS]


def _objects(directory: Path, namespace: str | None) -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    namespace = kustomization.get("namespace", namespace)
    found: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", ()):
        path = directory / entry
        if path.is_dir():
            found.extend(_objects(path, namespace))
        else:
            found.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return [_placed(o, namespace) for o in found]


def _placed(obj: Mapping[str, Any], namespace: str | None) -> dict[str, Any]:
    obj = dict(obj)
    if not namespace:
        return obj
    if obj["kind"] not in CLUSTER_SCOPED:
        obj["metadata"] = {**obj["metadata"], "namespace": namespace}
    if obj["kind"] in ("RoleBinding", "ClusterRoleBinding"):  # ServiceAccounts named bare
        obj["subjects"] = [
            {**s, "namespace": namespace}
            if s.get("kind") == "ServiceAccount" and "namespace" not in s
            else s
            for s in obj.get("subjects", ())
        ]
    return obj
