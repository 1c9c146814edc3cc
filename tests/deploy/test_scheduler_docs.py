"""The operator docs stay true: the version table of ``docs/scheduler.md`` says what the
manifests do, the settings and defaults of ``docs/tuning.md`` are the coordinator's, and
every repository path the three docs name exists."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.config import CoordinatorSettings
from tests.deploy.kubescheduler_types import VERSIONS
from tests.deploy.test_scheduler_configs import (
    OVERLAY_VERSIONS,
    REPO,
    SCHEDULER,
    SUPPORTED,
    kustomize,
)

DOCS = REPO / "docs"
OPERATOR_DOCS = [DOCS / "scheduler.md", DOCS / "tuning.md", DOCS / "troubleshooting.md"]


def tables(path: Path) -> Iterator[list[dict[str, str]]]:
    """Each Markdown table of ``path`` as rows of header → cell (backticks removed)."""
    lines = path.read_text().splitlines()
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and re.fullmatch(r"\|( *-+ *\|)+", lines[i + 1]):
            header = _cells(lines[i])
            rows = []
            for line in lines[i + 2 :]:
                if not line.startswith("|"):
                    break
                rows.append(dict(zip(header, _cells(line), strict=True)))
            yield rows


def _cells(line: str) -> list[str]:
    return [c.strip().replace("`", "") for c in line.strip().strip("|").split("|")]


def _minors(cell: str) -> tuple[int, int | None]:
    """``≥ 1.25`` → (25, None); ``1.23 – 1.25`` → (23, 25)."""
    found = [int(m) for m in re.findall(r"1\.(\d+)", cell)]
    return (found[0], None) if cell.startswith("≥") else (found[0], found[1])


def test_the_version_table_is_what_the_manifests_do() -> None:
    (table,) = [t for t in tables(DOCS / "scheduler.md") if "scheduler alone" in t[0]]
    rows = {row["kubescheduler.config.k8s.io/…"]: row for row in table}
    assert sorted(rows) == sorted(VERSIONS)
    for version, row in rows.items():
        assert _minors(row["Kubernetes"]) == SUPPORTED[version], version
        assert OVERLAY_VERSIONS[REPO / row["overlay (coordinator, agents, scheduler)"]] == version
        alone = REPO / row["scheduler alone"]
        assert alone == SCHEDULER / version
        deployment = kustomize(alone)[("Deployment", "stowage-scheduler")]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"registry.k8s.io/{row['default image']}", version


def _setting(path: str) -> Any:
    value: Any = CoordinatorSettings()
    for key in path.split("."):
        value = getattr(value, key)
    return value


def test_tuning_names_the_coordinators_settings_with_their_defaults() -> None:
    checked = []
    for table in tables(DOCS / "tuning.md"):
        for row in table:
            if "setting" in row and "default" in row:
                default = yaml.safe_load(re.sub(r"\(.*\)", "", row["default"]))
                assert _setting(row["setting"]) == default, row["setting"]
                checked.append(row["setting"])
    assert {"signals.contiguity_threshold_b", "signals.cpu_utilization_threshold_pct"} <= set(
        checked
    )


@pytest.mark.parametrize("doc", OPERATOR_DOCS, ids=lambda p: p.name)
def test_every_repository_path_a_doc_names_exists(doc: Path) -> None:
    named = re.findall(
        r"`((?:daemonset|coordinator|docs|tests|cli|hack)/[^`\s]+)`", doc.read_text()
    )
    assert named
    missing = [p for p in named if not (REPO / p).exists()]
    assert missing == []
