"""The test kit (``tests/kit.py``) holds the waiting helpers and the free-port picker once:
a module under ``tests/`` defining its own again fails here, naming where."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import kit

TESTS = Path(__file__).resolve().parent
KIT_ONLY = {"free_port": False, "eventually": True, "until": True}
"""Top-level functions only the kit defines, and whether the copy to catch is async (a
synchronous ``until`` elsewhere is another idea: kube-scheduler's API versions)."""


def twins() -> list[str]:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(kit.__file__).resolve():
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            defined = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if (
                defined
                and node.name in KIT_ONLY
                and (isinstance(node, ast.AsyncFunctionDef) or not KIT_ONLY[node.name])
            ):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno} {node.name}")
    return found


def test_no_test_module_defines_the_kits_helpers_again() -> None:
    assert twins() == []


async def test_eventually_returns_what_the_check_found_and_names_what_never_came() -> None:
    answers = iter([None, 0, "found"])
    assert await kit.eventually(lambda: next(answers), "an answer", every_s=0) == "found"
    try:
        await kit.eventually(lambda: None, "a thing that never comes", timeout_s=0.05)
    except AssertionError as e:
        assert str(e) == "not within 0.05 s: a thing that never comes"
    else:
        raise AssertionError("eventually returned without the condition")
