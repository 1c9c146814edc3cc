"""The RBAC the real-cluster tests and ``make run --cluster real`` apply is what
``kubectl kustomize`` renders from the same files (labels aside: they grant nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hack.cluster import manifests
from tests.deploy.manifests import render


def comparable(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def strip(o: dict[str, Any]) -> dict[str, Any]:
        return {**o, "metadata": {k: v for k, v in o["metadata"].items() if k != "labels"}}

    def key(o: dict[str, Any]) -> tuple[str, str, str]:
        return (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", ""))

    return sorted(map(strip, objects), key=key)


@pytest.mark.parametrize(
    "directory", [manifests.COORDINATOR_AND_AGENT, manifests.SECOND_SCHEDULER], ids=lambda d: d.name
)
def test_the_rbac_read_is_what_kustomize_renders(directory: Path) -> None:
    rendered = [dict(o) for o in render(directory) if o["kind"] in manifests.RBAC_KINDS]
    assert rendered, "kustomize rendered no RBAC"
    assert comparable(manifests.rbac(directory)) == comparable(rendered)
