"""Shared fixtures: a controllable clock and throwaway copies of recorded host trees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.hosts import FIXTURES, FakeClock

pytest_plugins = ["tests.realcgroup"]


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
