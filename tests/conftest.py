"""Shared fixtures: a controllable clock and throwaway copies of recorded host trees."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.hosts import FIXTURES, FakeClock

pytest_plugins = ["tests.realcgroup"]

REAL_CLUSTER = "tests/realcluster/"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n N --dist loadgroup`` (``make test``): every test of
    ``tests/realcluster`` in one unit of work, run on one worker with the session's one
    control plane (the largest unit, so it starts first), every other test on its own.
    pytest-xdist's own grouping by ``xdist_group`` renames the tests' node ids, which
    pytest 9 no longer allows: without this its groups quietly split across workers."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class RealClusterTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return REAL_CLUSTER if nodeid.startswith(REAL_CLUSTER) else nodeid

    return RealClusterTogether(config, log)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def host_copy(tmp_path: Path):
    """Copy a recorded host tree into tmp_path so a test may damage it."""

    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(FIXTURES / name, dst)
        return dst

    return copy
