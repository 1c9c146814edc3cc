"""Fixtures for the API emulator's tests: one emulator per test, served from a thread so
that the synchronous ``kubernetes`` client can call it, and client objects bound to it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from hack.kubeapi import KubeApi


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        yield api


@pytest.fixture
def api_client(kube: KubeApi) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=kube.url)) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def kubectl_run(kube: KubeApi, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run kubectl against the emulator with a private kubeconfig, cache and HOME; the
    finished process, whatever its exit status."""

    def run(
        *args: str,
        api: KubeApi = kube,
        token: str | None = None,
        ca_file: Path | None = None,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        config = api.kubeconfig(tmp_path / "kubeconfig", token=token, ca_file=ca_file)
        env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(config)}
        return subprocess.run(
            ["kubectl", "--cache-dir", str(tmp_path / "cache"), *args],
            capture_output=True,
            text=True,
            env=env,
            input=stdin,
            timeout=60,
            check=False,
        )

    return run


@pytest.fixture
def kubectl(kubectl_run: Callable[..., subprocess.CompletedProcess[str]]) -> Callable[..., str]:
    """kubectl that must succeed: its standard output."""

    def run(*args: str, **options: object) -> str:
        done = kubectl_run(*args, **options)
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run
