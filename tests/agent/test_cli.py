"""``stowage agent`` end to end, as a separate process: what an operator runs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from common import codec
from common.schema import NodeReport
from tests.clirun import REPO, stowage
from tests.hosts import FIXTURES


def _psi_totals(path: Path) -> dict[str, int]:
    out = {}
    for line in path.read_text().splitlines():
        kind, *pairs = line.split()
        out[kind] = int(dict(p.split("=") for p in pairs)["total"])
    return out


def test_once_on_this_machine_agrees_with_the_kernel_files():
    pressure = Path("/proc/pressure")
    before = {r: _psi_totals(pressure / r) for r in ("cpu", "io")} if pressure.is_dir() else {}
    result = stowage("agent", "--once", "--output", "json", "--pods-source", "none")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    codec.from_plain(NodeReport, report)  # the printed form is the wire form
    if before:
        after = {r: _psi_totals(pressure / r) for r in ("cpu", "io")}
        for resource in ("cpu", "io"):
            total = report["psi"]["system"][resource]["some"]["total_us"]
            assert before[resource]["some"] <= total <= after[resource]["some"]
    else:
        assert report["psi"].startswith("psi-unsupported")
    # contiguity: same zones as /proc/buddyinfo, same number of orders
    lines = Path("/proc/buddyinfo").read_text().splitlines()
    zones = {(int(line.split()[1].rstrip(",")), line.split()[3]) for line in lines}
    assert {(z["node"], z["zone"]) for z in report["memfrag"]["zones"]} == zones
    assert len(report["memfrag"]["zones"][0]["free_b_by_order"]) == len(lines[0].split()) - 4
    # NUMA: node ids and cpulists as sysfs has them
    node_root = Path("/sys/devices/system/node")
    numa = {n["node"]: n["cpus"] for n in report["numa"]["nodes"]}
    assert numa == {
        int(p.name[4:]): (p / "cpulist").read_text().strip() for p in node_root.glob("node[0-9]*")
    }
    # allocatable: capacity from meminfo
    mem_total = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    assert report["allocatable"]["memory"]["capacity_b"] == mem_total
    # no GPU here: absent, with a reason, never zero
    if not Path("/dev/nvidiactl").exists():
        assert report["gpus"].startswith("nvml-unavailable")
    assert report["pods"] == "pods-disabled"


def test_once_on_the_cgroup_v2_fixture_prints_per_cgroup_psi_and_kubepods_limits():
    root = FIXTURES / "k8s-v2-node"
    result = stowage(
        "agent",
        "--once",
        "--output",
        "json",
        "--node-name",
        "gpu-node-7",
        "--proc-root",
        str(root / "proc"),
        "--sys-root",
        str(root / "sys"),
        "--kubelet-config",
        str(root / "var/lib/kubelet/config.yaml"),
        "--pods-source",
        "none",
        "--sample-window",
        "0",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["node"] == "gpu-node-7"
    cgroups = report["psi"]["cgroups"]
    assert cgroups["besteffort"]["cpu"]["full"]["avg10_pct"] == 24.80
    assert cgroups["burstable"]["memory"]["some"]["total_us"] == 4_120_009
    assert cgroups["kubepods"]["io"]["full"]["avg300_pct"] == 0.55
    kubepods = report["allocatable"]["cgroup"]["kubepods"]
    assert kubepods["memory_limit_b"] == 65_848_316 * 1024 - 2 * 2**30
    assert kubepods["cpu_weight"] == 586
    assert report["allocatable"]["cgroup"]["qos"]["besteffort"]["cpu_quota_m"] == 4000


def test_msgpack_output_decodes_with_the_codec():
    root = FIXTURES / "two-numa-hugepages"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "agent",
            "--once",
            "--output",
            "msgpack",
            "--proc-root",
            str(root / "proc"),
            "--sys-root",
            str(root / "sys"),
            "--pods-source",
            "none",
            "--sample-window",
            "0",
        ],
        capture_output=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    report = codec.decode_report(result.stdout)
    assert [n.node for n in report.numa.nodes] == [0, 1]


@pytest.mark.parametrize("flag", ["--proc-root", "--sys-root"])
def test_missing_root_is_one_line_naming_the_path_and_exit_2(tmp_path, flag):
    missing = tmp_path / "nowhere"
    result = stowage("agent", "--once", flag, str(missing))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0]
    assert result.stdout == ""


def test_unknown_collector_and_missing_coordinator_are_config_errors():
    result = stowage("agent", "--once", "--collectors", "psi,bogus")
    assert result.returncode == 2 and "bogus" in result.stderr
    result = stowage("agent")
    assert result.returncode == 2 and "--coordinator" in result.stderr


@pytest.mark.parametrize("value", ["inf", "nan", "-1"])
def test_a_sample_window_that_never_ends_is_refused(value):
    result = stowage("agent", "--once", "--pods-source", "none", "--sample-window", value)
    assert result.returncode == 2
    assert result.stderr == (
        f"stowage agent: error: --sample-window {float(value)}: expected 0 to 60 s\n"
    )


def test_a_ca_file_that_is_not_a_bundle_is_one_line_and_exit_2(tmp_path):
    """Checked when the reporter starts, on the event loop: never a traceback or a hang."""
    cases = {
        "missing.pem": "No such file or directory",
        "fifo.pem": "not a regular file (a FIFO)",
        "empty.pem": "empty, expected PEM certificates",
        "latin1.pem": "not a PEM certificate bundle",
        "junk.pem": "no start line: cadata does not contain a certificate",
    }
    os.mkfifo(tmp_path / "fifo.pem")
    (tmp_path / "empty.pem").write_text("")  # cadata="" would trust the system store
    (tmp_path / "latin1.pem").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    running = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "agent",
                "--pods-source",
                "none",
                "--coordinator",
                "https://127.0.0.1:1",
                "--ca-file",
                str(tmp_path / name),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        for name in cases
    }
    for name, proc in running.items():
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (name, err)
        lines = err.splitlines()
        assert len(lines) == 1, (name, err)
        assert lines[-1].startswith(f"stowage agent: error: --ca-file {tmp_path / name}: "), name
        assert cases[name] in lines[-1] and "Traceback" not in err, name


@pytest.mark.parametrize("flag", ["--token-file", "--kubelet-token-file"])
def test_a_token_file_that_is_not_there_is_refused_at_start_up(tmp_path, flag):
    """Not a warning on every send: the agent would run for ever without reporting."""
    missing = tmp_path / "token"
    result = stowage(
        "agent", "--coordinator", "http://127.0.0.1:1", "--pods-source", "none", flag, str(missing)
    )
    assert result.returncode == 2
    assert result.stderr == f"stowage agent: error: {flag} {missing}: no such file\n"


def test_a_token_file_that_is_a_directory_is_refused_at_start_up(tmp_path):
    result = stowage("agent", "--coordinator", "http://127.0.0.1:1", "--token-file", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr == f"stowage agent: error: --token-file {tmp_path}: not a regular file\n"


def test_a_busy_metrics_port_is_one_line_naming_the_address_and_exit_2():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = stowage(
            "agent", "--coordinator", "http://127.0.0.1:1", "--pods-source", "none",
            "--metrics-listen", address,
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith(f"stowage agent: error: --metrics-listen {address}: ")
    assert "Address already in use" in lines[0]
