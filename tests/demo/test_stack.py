"""Starting the demo's processes: a process that ends before it serves, or never says it
does, stops the demo with what it said or how long it was given."""

from __future__ import annotations

import re
import sys

import pytest

from hack.demo import stack
from hack.demo.stack import Refused

READY = re.compile("serving on")


def test_a_process_that_ends_before_serving_is_refused_with_its_own_words_shown(tmp_path, capsys):
    command = [sys.executable, "-c", "import sys; sys.exit('x: error: port taken')"]
    with pytest.raises(Refused) as refused, stack._process(command, tmp_path / "x.log", READY):
        pass
    assert str(refused.value) == ""
    assert capsys.readouterr().err == "x: error: port taken\n"


def test_a_process_that_never_says_it_serves_is_given_up_on(tmp_path, monkeypatch):
    monkeypatch.setattr(stack, "STARTUP_S", 0.5)
    command = [sys.executable, "-c", "import time; print('starting'); time.sleep(60)"]
    log = tmp_path / "slow.log"
    with (
        pytest.raises(Refused, match=r"slow did not start serving in 0.5 s"),
        stack._process(command, log, READY),
    ):
        pass


def test_a_process_that_serves_is_handed_over_and_stopped_on_the_way_out(tmp_path):
    command = [
        sys.executable, "-c",
        "import sys, time; print('serving on x', file=sys.stderr, flush=True); time.sleep(60)",
    ]  # fmt: skip
    with stack._process(command, tmp_path / "ok.log", READY) as proc:
        assert proc.poll() is None
    assert proc.returncode is not None
    assert "serving on x" in (tmp_path / "ok.log").read_text()
