"""A missing shared trace fails the run; only a local run may turn that into a skip."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.sim.simfiles import ALLOW_MISSING, need

FAIL = pytest.fail.Exception
SKIP = pytest.skip.Exception


def outcome(path: Path, environ: Mapping[str, str]) -> tuple[type[BaseException], str]:
    """What ``need`` does about a missing file, caught here rather than let a skip
    propagate: a guard broken into skipping must fail these tests, not skip them."""
    try:
        need(path, environ)
    except (FAIL, SKIP) as raised:
        return type(raised), str(raised)
    raise AssertionError(f"need() returned for the missing {path}")


def test_a_present_trace_file_is_returned(tmp_path):
    path = tmp_path / "openb_node_list_gpu_node.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\n")
    assert need(path, environ={}) == path


def test_a_missing_trace_file_fails_and_names_the_file(tmp_path):
    kind, message = outcome(tmp_path / "openb_pod_list_default.csv", environ={})
    assert kind is FAIL
    assert f"{tmp_path}/openb_pod_list_default.csv is missing" in message
    assert f"{ALLOW_MISSING}=1" in message


def test_the_local_opt_out_skips_and_names_the_file(tmp_path):
    kind, message = outcome(tmp_path / "openb_pod_list_default.csv", {ALLOW_MISSING: "1"})
    assert kind is SKIP
    assert f"{tmp_path}/openb_pod_list_default.csv is missing" in message


@pytest.mark.parametrize("value", ["0", "", "yes"])
def test_only_the_value_1_opts_out(tmp_path, value):
    assert outcome(tmp_path / "absent.csv", {ALLOW_MISSING: value})[0] is FAIL


def test_ci_ignores_the_opt_out(tmp_path):
    assert outcome(tmp_path / "absent.csv", {ALLOW_MISSING: "1", "CI": "true"})[0] is FAIL
