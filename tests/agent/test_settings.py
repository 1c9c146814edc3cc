"""Agent settings: values that would defeat a guard are refused, naming the setting."""

from __future__ import annotations

import pytest

from agent.settings import AgentSettings
from common.errors import ConfigError
from tests.hosts import FIXTURES, host_paths


@pytest.mark.parametrize("timeout_s", [float("inf"), float("nan"), 0.0, -1.0, 601.0])
def test_the_collector_deadline_must_be_finite_and_positive(timeout_s):
    """An infinite deadline would let one hung collector hold the cycle forever."""
    paths = host_paths(FIXTURES / "k8s-v2-node")
    with pytest.raises(ConfigError, match=f"collector timeout {timeout_s} s: expected 0 <"):
        AgentSettings(paths=paths, node_name="n", collector_timeout_s=timeout_s)
    assert (
        AgentSettings(paths=paths, node_name="n", collector_timeout_s=600).collector_timeout_s
        == 600
    )
