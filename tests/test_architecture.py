"""Layer rules: what may import what (DESIGN §1, one scoring engine; STYLE §A).

* ``common`` is the shared contract: it imports none of the other parts.
* ``agent`` and ``coordinator`` are independent of each other.
* Nothing in the product imports ``hack`` or ``tests``; only ``cli`` sees every part.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "common": {"agent", "coordinator", "cli", "hack", "tests"},
    "agent": {"coordinator", "cli", "hack", "tests"},
    "coordinator": {"agent", "cli", "hack", "tests"},
    "cli": {"tests"},
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layer_rules(package):
    offenders = {
        str(path.relative_to(REPO)): sorted(imported_packages(path) & FORBIDDEN[package])
        for path in (REPO / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_rule_checker_sees_imports():
    sample = REPO / "agent" / "main.py"
    assert {"agent", "common", "asyncio"} <= imported_packages(sample)
