"""``stowage coordinator --config`` with files that are not settings: one line, exit 2.

Real processes; the subprocess timeout is the failure mode of a hang. They start
together, as the coordinator's imports dominate each run. The cases that crashed or could
hang run here; a directory, an oversized file and NaN are refused by the same code
(tests/common/test_config.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from common.config import MAX_DEPTH, MAX_NODES

REPO = Path(__file__).resolve().parents[2]


def _bomb() -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\npolicy: {args: {bomb: *a9}}\n"


def test_bad_config_files_are_one_line_naming_the_file_and_exit_2(tmp_path):
    cases: dict[str, str] = {
        "latin1.yaml": "not UTF-8 (byte 21 is 0xe9)",
        "fifo.yaml": "not a regular file (a FIFO)",
        "bomb.yaml": f"invalid YAML: more than {MAX_NODES} nodes with aliases expanded (line 7)",
        "deep.yaml": f"invalid YAML: nested deeper than {MAX_DEPTH} levels (line 1)",
        "typo.yaml": "ingest.max_body_b: expected int, got str",
    }
    (tmp_path / "latin1.yaml").write_bytes("kube: {namespace: caf\xe9}\n".encode("latin-1"))
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "bomb.yaml").write_text(_bomb())
    (tmp_path / "deep.yaml").write_text("policy: " + "[" * 50_000 + "]" * 50_000 + "\n")
    (tmp_path / "typo.yaml").write_text("ingest: {max_body_b: 1MiB}\n")
    running = {
        name: subprocess.Popen(
            [sys.executable, "-m", "cli.main", "coordinator", "--config", str(tmp_path / name)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        for name in cases
    }
    for name, proc in running.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (name, err)
        assert out == ""
        assert err == f"stowage coordinator: error: {tmp_path / name}: {cases[name]}\n", name


def test_an_unknown_log_level_is_a_usage_error_not_a_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "--log-level", "LOUD", "agent", "--once"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "stowage: error: argument --log-level: invalid choice: 'LOUD'"
        " (choose from 'DEBUG', 'INFO', 'WARNING', 'ERROR')"
    )
    assert result.stdout == ""
