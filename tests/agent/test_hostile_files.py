"""``stowage agent --once`` against host files that are not what they should be.

A FIFO, an endless device, a huge file, a non-UTF-8 or alias-bomb kubelet config: each
must cost only the section (or field) that reads it, with a reason, and the run must
finish. The processes are real; the subprocess timeout is the failure mode of a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.collectors import allocatable
from agent.hostpaths import HostPaths
from agent.kernelfiles import MAX_KERNEL_FILE_B
from common import codec
from common.config import MAX_DEPTH, MAX_FILE_B

REPO = Path(__file__).resolve().parents[2]


def _agent(root: Path, kubelet_config: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "cli.main", "agent", "--once", "--node-name", "n1",
            "--proc-root", str(root / "proc"), "--sys-root", str(root / "sys"),
            "--kubelet-config", str(kubelet_config), "--pods-source", "none",
            "--sample-window", "0", "--collector-timeout", "5", *extra,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def _report(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def _replace(path: Path, make: Any) -> None:
    path.unlink()
    make(path)


def test_once_finishes_with_a_fifo_an_endless_device_and_a_huge_kernel_file(host_copy):
    root = host_copy("k8s-v2-node")
    proc = root / "proc"
    _replace(proc / "pressure" / "memory", os.mkfifo)  # no writer: open(2) would block
    _replace(proc / "buddyinfo", lambda p: p.symlink_to("/dev/zero"))
    _replace(proc / "stat", lambda p: os.truncate(_touch(p), 4 * MAX_KERNEL_FILE_B))
    report = _report(_agent(root, root / "var/lib/kubelet/config.yaml"))
    # The FIFO costs one PSI resource; the rest of PSI is there.
    memory = report["psi"]["system"]["memory"]
    assert memory.startswith("error: ") and "not a regular file (a FIFO)" in memory
    assert report["psi"]["system"]["cpu"]["some"]["total_us"] == 1_845_220_114
    assert report["memfrag"] == (
        f"error: read {proc / 'buddyinfo'}: not a regular file (a character device)"
    )
    assert report["usage"] == f"error: read {proc / 'stat'}: larger than {MAX_KERNEL_FILE_B} bytes"
    assert report["allocatable"]["memory"]["capacity_b"] == 65_848_316 * 1024
    assert [n["node"] for n in report["numa"]["nodes"]] == [0]


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (os.mkfifo, "not a regular file (a FIFO)"),
        (lambda p: p.symlink_to("/dev/zero"), "not a regular file (a character device)"),
        (lambda p: os.truncate(_touch(p), 4 * MAX_KERNEL_FILE_B), "larger than"),
        (lambda p: p.write_bytes(b"   8 0 sda \xff\xfe\n"), "error: read"),
        (lambda p: p.write_text("   8 0 " + "x" * 10_000 + " 1 2 3\n"), "error: parse"),
    ],
)
def test_a_hostile_diskstats_costs_only_the_disks(host_copy, make, reason):
    root = host_copy("k8s-v2-node")
    make(root / "proc" / "diskstats")
    report = _report(_agent(root, root / "var/lib/kubelet/config.yaml"))
    # --once samples rate collectors twice: the first sample's failure stands too.
    assert report["usage"]["disks"].startswith("error: ") and reason in report["usage"]["disks"]
    assert report["usage"]["memory"]["total_b"] == 65_848_316 * 1024
    assert report["usage"]["cpu"].startswith("no-progress")  # the recorded /proc/stat is still


def _touch(path: Path) -> Path:
    path.touch()
    return path


def _bad_kubelet_configs(directory: Path) -> dict[str, tuple[Path, str]]:
    """Kubelet configs that are not configs, each with the reason the agent must give."""
    cases = {
        "latin-1": (directory / "latin1.yaml", "not UTF-8 (byte 44 is 0xe9)"),
        "fifo": (directory / "fifo.yaml", "not a regular file (a FIFO)"),
        "alias bomb": (directory / "bomb.yaml", "nodes with aliases expanded"),
        "directory": (directory / "dir.yaml", "not a regular file (a directory)"),
        "huge": (directory / "huge.yaml", f"larger than {MAX_FILE_B} bytes"),
        "deep": (directory / "deep.yaml", f"nested deeper than {MAX_DEPTH} levels"),
    }
    latin1 = "kind: KubeletConfiguration\ncgroupDriver: caf\xe9\n".encode("latin-1")
    cases["latin-1"][0].write_bytes(latin1)
    os.mkfifo(cases["fifo"][0])
    cases["alias bomb"][0].write_text(_billion_laughs())
    cases["directory"][0].mkdir()
    os.truncate(_touch(cases["huge"][0]), MAX_FILE_B + 1)
    cases["deep"][0].write_text("kubeReserved: " + "[" * 5000 + "]" * 5000 + "\n")
    return cases


def _only_kubelet_fields_absent(allocatable: dict[str, Any], path: Path, reason: str) -> None:
    assert allocatable["kubelet"].startswith(f"error: kubelet config: {path}: ")
    assert reason in allocatable["kubelet"]
    # Only the kubelet's part is missing: capacity and cgroup limits are measured.
    assert allocatable["memory"]["capacity_b"] == 65_848_316 * 1024
    assert allocatable["memory"]["kubelet_allocatable_b"] is None
    assert allocatable["cgroup"]["kubepods"]["cpu_weight"] == 586


def test_a_kubelet_config_that_is_not_a_config_costs_only_its_fields(host_copy, tmp_path):
    """The cases that crashed or could hang, as real agent runs (started together)."""
    root = host_copy("k8s-v2-node")
    cases = _bad_kubelet_configs(tmp_path)
    running = {
        name: _agent(root, cases[name][0], "--collectors", "allocatable")
        for name in ("latin-1", "fifo", "alias bomb")
    }
    for name, proc in running.items():
        _only_kubelet_fields_absent(_report(proc)["allocatable"], *cases[name])


@pytest.mark.parametrize("case", ["latin-1", "alias bomb", "directory", "huge", "deep"])
def test_every_bad_kubelet_config_costs_only_its_fields_in_the_collector(
    host_copy, tmp_path, clock, case
):
    root = host_copy("k8s-v2-node")
    path, reason = _bad_kubelet_configs(tmp_path)[case]
    paths = HostPaths.under(root / "proc", root / "sys", kubelet_config=path)
    section = codec.to_plain(allocatable.AllocatableCollector(paths, clock).collect())
    _only_kubelet_fields_absent(section, path, reason)


def _billion_laughs() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    lines.append("kubeReserved: {cpu: *a9}")
    return "\n".join(lines) + "\n"
