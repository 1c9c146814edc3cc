"""A clone runs with nothing beside it: the default trace is shipped in the repository, byte
for byte as its SOURCE.md says, every default run reads it from there, and the ``stowage``
command loads the simulator only for ``stowage sim``."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys

from cli.main import build_parser
from hack.demo import main as demo
from hack.sim import shipped
from tests.clirun import REPO, stowage

SOURCE = shipped.OPENB / "SOURCE.md"


def inside_repo(path) -> bool:
    return path.resolve().is_relative_to(REPO.resolve())


def test_the_shipped_files_are_the_sources_bytes():
    """Each file's sha256 as SOURCE.md records it from the upstream trace."""
    table = dict(re.findall(r"^\| (\S+\.csv) \|.*\| ([0-9a-f]{64}) \|$", SOURCE.read_text(), re.M))
    assert set(table) == {shipped.DEFAULT_NODES.name, shipped.DEFAULT_PODS.name}
    for name, sha256 in table.items():
        assert hashlib.sha256((shipped.OPENB / name).read_bytes()).hexdigest() == sha256, name
    text = SOURCE.read_text()
    assert "research or study purpose" in text and "@inproceedings{FGD2023" in text


def test_every_default_trace_is_inside_the_repository():
    args = build_parser().parse_args(["sim", "--policies", "fgd", "--out", "x"])
    defaults = [
        args.nodes,
        shipped.DEFAULT_PODS,
        demo.NODE_LIST,
        demo.POD_LIST,
        shipped.OPENB,  # python -m hack.sim.robustness's --trace
    ]
    for path in defaults:
        assert inside_repo(path) and path.exists(), path
    assert args.pods is None  # filled in with shipped.DEFAULT_PODS by the command


def test_stowage_sim_runs_on_the_shipped_trace_without_naming_it(tmp_path):
    run = stowage(
        "sim", "--policies", "best-fit", "--seeds", "42", "--jobs", "1", "--no-plot",
        "--no-limit", "--out", str(tmp_path),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = (tmp_path / "results.csv").read_text().splitlines()
    assert rows[1].startswith("default,best-fit,42,0,")  # the default workload, replayed
    assert "| default |" in run.stdout


HEAVY = ("hack.sim.main", "hack.sim.replay", "hack.sim.trace", "matplotlib", "scipy", "dask")


def loaded_after(code: str) -> list[str]:
    """The modules of :data:`HEAVY` a fresh interpreter holds after ``code``."""
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    loaded: list[str] = eval(out.stdout)  # noqa: S307 - our own probe's printed list
    return loaded


def test_the_cli_loads_the_simulator_only_for_stowage_sim():
    other = "from cli.main import build_parser\nbuild_parser().parse_args(['top'])"
    assert loaded_after(other) == []
    sim = "from cli.main import build_parser\nargs = build_parser().parse_args(['sim', '--policies', 'x', '--out', 'y'])"  # noqa: E501
    assert loaded_after(sim) == []  # parsing alone loads nothing heavy either
    # the probe sees them where they are loaded: what the command's body imports
    assert {"hack.sim.main", "hack.sim.replay"} <= set(loaded_after("import hack.sim.main"))
