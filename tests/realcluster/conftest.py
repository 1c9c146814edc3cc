"""The real control plane as a session fixture, for every test in this directory.

Tests here are marked ``realcluster``: they run against kube-apiserver, etcd,
kube-controller-manager, kwok and (where a test starts one) kube-scheduler of the release
``hack/cluster`` pins, built from source on first use and cached. A test that cannot start
them fails with the reason; nothing here falls back to the API emulator.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.cluster.build import ensure_built
from hack.cluster.controlplane import ControlPlane, running
from tests.realcluster.kit import Cluster

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test here ``realcluster`` (under ``make test``'s workers they all run on
    one: ``pytest_xdist_make_scheduler`` in ``tests/conftest.py``)."""
    for item in items:
        if HERE in Path(item.fspath).resolve().parents:
            item.add_marker(pytest.mark.realcluster)


@pytest.fixture(scope="session")
def control_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # a first build's progress shows as it goes
        bin_dir = ensure_built()
    with running(tmp_path_factory.mktemp("control-plane"), bin_dir) as plane:
        yield plane


@pytest.fixture(scope="session")
def cluster(control_plane: ControlPlane) -> Cluster:
    return Cluster(control_plane)
