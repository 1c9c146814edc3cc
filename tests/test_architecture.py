"""Layer rules and import hygiene (DESIGN §1 and §3, STYLE §A).

The layers themselves are import-linter contracts in ``.importlinter`` (``make test`` runs
``lint-imports`` too); running them here means a plain ``pytest`` catches a layer breach
as well. The second check imports every module on its own, the way a user's
``python -m`` or a test run that happens to import it first would: an import cycle that
only bites in one import order shows up here, not in production.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("cli", "hack", "coordinator", "agent", "common")
RUN_ON_IMPORT = frozenset({"hack.kubeapi.__main__"})
"""Modules that *are* a program (``python -m``): importing them runs it."""

# One interpreter imports everything once (so third-party packages are loaded), forgets
# every project module, then forks a child per module: each child imports its module into
# a sys.modules holding no project module at all, as a fresh interpreter would, at the
# cost of a fork instead of an interpreter start and a numpy/aiohttp/kubernetes import
# (as many children at a time as there are CPUs).
ISOLATED_IMPORTS = textwrap.dedent(
    """
    import importlib, json, os, sys, traceback, warnings
    warnings.simplefilter("error")
    roots, modules, errors = json.loads(sys.argv[1])
    for name in modules:  # preload third-party packages; a failure is the child's to report
        try:
            importlib.import_module(name)
        except Exception:
            pass
    for name in [m for m in sys.modules if m.split(".")[0] in roots]:
        del sys.modules[name]
    running, failed, todo = {}, {}, list(modules)
    while todo or running:
        while todo and len(running) < (os.cpu_count() or 1):
            name = todo.pop()
            pid = os.fork()
            if pid == 0:
                try:
                    importlib.import_module(name)
                except BaseException:
                    with open(os.path.join(errors, name), "w") as f:
                        f.write(traceback.format_exc())
                    os._exit(1)
                os._exit(0)
            running[pid] = name
        pid, status = os.waitpid(-1, 0)
        name = running.pop(pid)
        if status:
            path = os.path.join(errors, name)
            failed[name] = open(path).read() if os.path.exists(path) else f"status {status}"
    print(json.dumps(failed))
    """
)


def project_modules() -> list[str]:
    graph = grimp.build_graph(*ROOTS, cache_dir=None)
    return sorted(graph.modules - RUN_ON_IMPORT)


def test_import_contracts_are_kept():
    # In a child process: import-linter configures logging as it runs, which in this
    # process would silence the loggers later tests capture.
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("lint-imports")),
            "--no-cache",
            "--config",
            str(REPO / ".importlinter"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_module_imports_on_its_own(tmp_path):
    modules = project_modules()
    assert {"coordinator.state.cluster", "agent.main", "hack.sim.replay"} <= set(modules)
    done = subprocess.run(
        [sys.executable, "-c", ISOLATED_IMPORTS, json.dumps([ROOTS, modules, str(tmp_path)])],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    failed = json.loads(done.stdout)
    assert not failed, "\n".join(f"{name} alone:\n{error}" for name, error in failed.items())
