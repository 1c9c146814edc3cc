from __future__ import annotations

from pathlib import Path

import pytest

import agent.collectors
from agent import registry
from common.errors import ConfigError
from common.schema import SECTIONS, NodeReport


def test_every_collector_module_is_registered_and_fills_its_section():
    directory = Path(agent.collectors.__file__).parent
    modules = {p.stem for p in directory.glob("*.py")} - {"__init__", "base"}
    assert set(registry.COLLECTORS) == modules
    assert tuple(registry.COLLECTORS) == SECTIONS
    assert set(SECTIONS) <= set(NodeReport.__struct_fields__)


def test_select_is_strict_and_keeps_report_order():
    assert registry.select(("usage", "psi")) == ["psi", "usage"]
    assert "gpus" not in registry.select(disabled=("gpus",))
    with pytest.raises(ConfigError, match="bogus"):
        registry.select(("bogus",))
    with pytest.raises(ConfigError, match="nope"):
        registry.select(disabled=("nope",))
