"""Fixtures for the API emulator's tests: one emulator per test, served from a thread so
that the synchronous ``kubernetes`` client can call it, and client objects bound to it."""

from __future__ import annotations

from collections.abc import Iterator

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
