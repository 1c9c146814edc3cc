"""The test kit (``tests/kit.py``) holds the waiting helpers, the free-port picker and the
realistic report builder once: a module under ``tests/`` defining its own again (by name,
by an inline port pick, or by building most of a report's sections itself) fails here,
naming where."""

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


SECTIONS = frozenset(
    {
        "PsiSection",
        "MemfragSection",
        "AllocatableSection",
        "NumaSection",
        "GpuSection",
        "UsageSection",
        "PodsSection",
    }
)
"""A report's sections; a module that builds more than half of them builds a report."""
MOST_SECTIONS = len(SECTIONS) // 2


def _called(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name):
            return node.func.id
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
    return None


def report_builders(tree: ast.AST, where: str) -> list[str]:
    """``where`` if it builds more than :data:`MOST_SECTIONS` of a report's sections."""
    built = {name for node in ast.walk(tree) if (name := _called(node)) in SECTIONS}
    return [f"{where} builds {', '.join(sorted(built))}"] if len(built) > MOST_SECTIONS else []


def port_picks(tree: ast.AST, where: str) -> list[str]:
    """``with`` blocks that bind a socket to port 0 and close it again to learn a free port
    (what :func:`tests.kit.free_port` does), as opposed to holding or listening on it."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.With | ast.AsyncWith):
            continue
        calls = {_called(sub) for sub in ast.walk(node)}
        binds_zero = any(
            isinstance(sub, ast.Call)
            and _called(sub) == "bind"
            and sub.args
            and isinstance(address := sub.args[0], ast.Tuple)
            and isinstance(address.elts[-1], ast.Constant)
            and address.elts[-1].value == 0
            for sub in ast.walk(node)
        )
        if binds_zero and "getsockname" in calls and "listen" not in calls:
            found.append(f"{where}:{node.lineno} picks a free port itself")
    return found


def kit_twins() -> list[str]:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(kit.__file__).resolve():
            continue
        where = str(path.relative_to(TESTS))
        tree = ast.parse(path.read_text(), where)
        found += report_builders(tree, where) + port_picks(tree, where)
    return found


def test_no_test_module_builds_a_report_or_picks_a_port_itself() -> None:
    assert kit_twins() == []


def test_the_checks_find_a_builder_and_a_port_pick() -> None:
    builder = ast.parse("r = NodeReport(psi=PsiSection(), gpus=GpuSection(), numa=NumaSection(),"
                        " pods=PodsSection(), usage=UsageSection())")  # fmt: skip
    assert report_builders(builder, "b.py") == [
        "b.py builds GpuSection, NumaSection, PodsSection, PsiSection, UsageSection"
    ]
    pick = ast.parse(
        "with socket.socket() as s:\n    s.bind(('127.0.0.1', 0))\n    port = s.getsockname()[1]\n"
    )
    assert port_picks(pick, "p.py") == ["p.py:1 picks a free port itself"]
    held = ast.parse(
        "with socket.socket() as s:\n"
        "    s.bind(('127.0.0.1', 0))\n"
        "    s.listen()\n"
        "    port = s.getsockname()[1]\n"
    )
    assert port_picks(held, "h.py") == []


async def test_eventually_returns_what_the_check_found_and_names_what_never_came() -> None:
    answers = iter([None, 0, "found"])
    assert await kit.eventually(lambda: next(answers), "an answer", every_s=0) == "found"
    try:
        await kit.eventually(lambda: None, "a thing that never comes", timeout_s=0.05)
    except AssertionError as e:
        assert str(e) == "not within 0.05 s: a thing that never comes"
    else:
        raise AssertionError("eventually returned without the condition")
