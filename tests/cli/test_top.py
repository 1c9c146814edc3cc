"""``stowage top`` against a real coordinator's ``/debug/nodes`` over HTTP: the table, each
sort's order, 80 columns, ``--watch`` redrawing what changed, a coordinator that cannot be
reached (one line, exit 2), bad options, and ``kubectl stowage top`` through real kubectl."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from cli import main as cli_main
from cli import top
from tests.clirun import REPO, stowage
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start
from tests.coordinator.nodeview.nodeview_rig import two_nodes

HEADER = "NODE               MODEL        GPU  FULL   FRAG CONTIG  PSI-C  PSI-M THR    AGE"
GPU_A = re.compile(
    r"gpu-a              A100       3\.0/4   50%   1500    94%   12\.5   12\.5   - +\d+s$"
)
CPU_B = "cpu-b              -              -    0%      -      -      -      -   -      -"


def args_of(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    top.add_arguments(parser)
    return parser.parse_args(list(argv))


async def run_top(*argv: str, sleep: Any = None) -> tuple[int, str]:
    out = io.StringIO()
    extra = {} if sleep is None else {"sleep": sleep}
    code = await asyncio.to_thread(top.main, args_of(*argv), out, **extra)  # synchronous CLI
    return code, out.getvalue()


async def test_top_prints_one_row_per_node_in_80_columns(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    c = await two_nodes(api, start)
    code, text = await run_top("--coordinator", c.debug_url)
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == "2 nodes, 1 stale, 0 throttled; fullest first"
    assert lines[1] == HEADER
    assert GPU_A.fullmatch(lines[2]), lines[2]
    assert lines[3] == CPU_B
    assert len(lines) == 4
    assert max(map(len, lines)) <= 80

    code, text = await run_top("--coordinator", c.debug_url, "--filter", "CPU", "--sort", "name")
    assert (code, text.splitlines()[2:]) == (0, [CPU_B])


def tile(name: str, **values: Any) -> dict[str, Any]:
    base = {
        "name": name, "gpu_model": "H100", "gpus": 8, "gpu_free_milli": 8000, "fullness": 0.0,
        "gpu_frag_milli": None, "contiguity": None, "psi_cpu": None, "psi_memory": None,
        "throttled": False, "throttle_reason": None, "stale": False, "age_s": None,
        "reporting": False,
    }  # fmt: skip
    return {**base, **values}


TILES = [
    tile("n-a", fullness=0.2, gpu_frag_milli=100.0, psi_cpu=5.0, psi_memory=50.0, age_s=10.0),
    tile("n-b", fullness=0.9),  # never reported: no signals, no age
    tile("n-c", fullness=0.5, gpu_frag_milli=900.0, psi_cpu=20.0, psi_memory=1.0, age_s=100.0),
    tile("n-d", fullness=0.5, gpu_frag_milli=0.0, psi_cpu=20.0, age_s=50.0),
]


@pytest.mark.parametrize(
    ("sort", "order"),
    [
        ("fullness", ["n-b", "n-c", "n-d", "n-a"]),  # ties by name
        ("frag", ["n-c", "n-a", "n-d", "n-b"]),  # unknown last, after a known 0
        ("psi", ["n-a", "n-c", "n-d", "n-b"]),  # the larger of CPU and memory
        ("age", ["n-b", "n-c", "n-d", "n-a"]),  # never reported: at the top
        ("name", ["n-a", "n-b", "n-c", "n-d"]),
    ],
)
def test_each_sort_orders_the_rows(sort: str, order: list[str]) -> None:
    rows = top.table(list(reversed(TILES)), sort).splitlines()[2:]
    assert [row.split()[0] for row in rows] == order
    assert [row.split()[0] for row in top.table(TILES, sort, limit=2).splitlines()[2:]] == (
        order[:2]
    )


def test_long_names_and_large_values_still_fit_80_columns() -> None:
    huge = tile(
        "a-node-name-far-longer-than-its-column-" * 3, gpu_model="NVIDIA-H100-80GB-HBM3",
        gpus=16, gpu_free_milli=16000, fullness=1.0, gpu_frag_milli=123456.7, contiguity=1.0,
        psi_cpu=100.0, psi_memory=100.0, throttled=True, stale=True, age_s=9e9, reporting=True,
    )  # fmt: skip
    lines = top.table([huge], "name").splitlines()
    assert max(map(len, lines)) <= 80
    assert lines[2].startswith(
        "a-node-name-far-l~ NVIDIA-~ 16.0/16  100% 123457   100%  100.0  100.0 yes 10416~"
    )


async def test_watch_redraws_until_interrupted(api: rig.RecordingKubeApi, start: Start) -> None:
    c = await two_nodes(api, start)
    loop = asyncio.get_running_loop()
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        """Between the two draws cpu-b's agent reports; at the second, Ctrl-C."""
        slept.append(seconds)
        if len(slept) == 2:
            raise KeyboardInterrupt
        report = rig.node_report("cpu-b", free_2mib_b=rig.MIB, cpu_pressure_pct=80.0)
        posted = asyncio.run_coroutine_threadsafe(
            c.report(report, api.agent_token("cpu-b")), loop
        ).result(timeout=30)
        assert posted[0] == 200

    code, text = await run_top(
        "--coordinator", c.debug_url, "--watch", "2.5", "--sort", "psi", sleep=sleep
    )
    assert code == 0
    assert slept == [2.5, 2.5]
    first, second = text.split(top.CLEAR)[1:]
    assert (
        first.splitlines()[0] == "2 nodes, 1 stale, 0 throttled; most stalled (CPU or memory) first"
    )
    assert (
        second.splitlines()[0]
        == "2 nodes, 0 stale, 0 throttled; most stalled (CPU or memory) first"
    )
    assert [row.split()[0] for row in second.splitlines()[2:]] == ["cpu-b", "gpu-a"]


def test_an_unreachable_coordinator_is_one_line_and_exit_2() -> None:
    result = stowage("top", "--coordinator", "http://127.0.0.1:9")
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("stowage top: cannot ask http://127.0.0.1:9/debug/nodes: ")


async def test_a_server_that_sends_no_node_list_is_one_line_and_exit_2(
    aiohttp_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    async def not_a_coordinator(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_get("/debug/nodes", not_a_coordinator)
    server = await aiohttp_server(app)
    url = str(server.make_url("")).rstrip("/")
    code, text = await run_top("--coordinator", url)
    assert (code, text) == (2, "")
    assert capsys.readouterr().err == f"stowage top: {url} sent no node list\n"


@pytest.mark.parametrize(
    ("option", "error"),
    [
        (["--watch", "0"], "argument --watch: expected seconds above 0, got '0'"),
        (["--watch", "nan"], "argument --watch: expected seconds above 0, got 'nan'"),
        (["--limit", "0"], "argument --limit: expected a whole number of at least 1, got '0'"),
        (
            ["--limit", "9" * 5000],
            "argument --limit: expected a whole number of at least 1, got 5000 characters",
        ),
        (
            ["--limit", "\uff13"],
            "argument --limit: expected a whole number of at least 1, got '\uff13'",
        ),
        (["--sort", "load"], "argument --sort: invalid choice: 'load'"),
    ],
)
def test_bad_options_exit_2_naming_them(
    option: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_main.main(["top", *option])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"stowage top: error: {error}")


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
async def test_kubectl_stowage_top_runs_the_plugin_entry_point(
    api: rig.RecordingKubeApi, start: Start, tmp_path: Path
) -> None:
    """kubectl finds ``kubectl-stowage`` on PATH and runs it with the words after
    ``stowage``. The executable here is what pip makes of pyproject's entry point."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["kubectl-stowage"].split(":")
    plugin = tmp_path / "bin" / "kubectl-stowage"
    plugin.parent.mkdir()
    plugin.write_text(
        f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n"
    )
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    c = await two_nodes(api, start)
    env = {
        **os.environ,
        "PATH": f"{plugin.parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
        "HOME": str(tmp_path),
        "KUBECONFIG": str(tmp_path / "none"),
    }
    assert KUBECTL is not None
    done = await asyncio.to_thread(
        subprocess.run,
        [KUBECTL, "stowage", "top", "--coordinator", c.debug_url, "--sort", "name"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1:3] == [HEADER, CPU_B]
    assert GPU_A.fullmatch(lines[3]) and len(lines) == 4
    assert lines[0] == "2 nodes, 1 stale, 0 throttled; by name"
    help_text = await asyncio.to_thread(
        subprocess.run, [KUBECTL, "stowage", "--help"], capture_output=True, text=True,
        env=env, timeout=60, check=False,
    )  # fmt: skip
    assert help_text.stdout.startswith("usage: kubectl stowage ")


def test_the_plugin_runs_the_same_subcommands_under_its_own_name() -> None:
    args = cli_main.build_parser("kubectl stowage").parse_args(["top", "--sort", "age"])
    assert (args.run, args.sort) == (top.main, "age")
