"""The shared cooldowns' Lease on the real API server, as the coordinator's ServiceAccount
with the shipped RBAC: the leader's writer creates it, then patches it; every replica's
watch lists and watches it by name; the value read back is the one written."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from coordinator.kube.cooldowns import CooldownLease
from coordinator.kube.leader import Fence
from coordinator.live import cooldowns
from coordinator.live.cooldowns import SharedCooldowns
from tests.hosts import FakeClock
from tests.realcluster import kit

QUEUE: Final = "rc-cooldowns-queue"
"""A queue no other module's pods are in: the Lease is read by every coordinator here."""


@pytest.fixture
def leases(cluster: kit.Cluster, tmp_path: Path) -> Iterator[client.ApiClient]:
    """The coordinator ServiceAccount's client; the Lease deleted afterwards."""
    cluster.apply(kit.shipped_rbac())
    path = cluster.kubeconfig_for(kit.COORDINATOR_SA, tmp_path / "coordinator.kubeconfig")
    api = config.new_client_from_config(config_file=str(path))
    yield api
    admin = client.CoordinationV1Api(cluster.api)
    with contextlib.suppress(ApiException):
        admin.delete_namespaced_lease(cooldowns.LEASE, kit.NAMESPACE)
    api.close()


def test_the_coordinator_writes_and_watches_its_cooldowns_lease(
    leases: client.ApiClient,
) -> None:
    clock = FakeClock()
    fence = Fence(3600.0, clock.monotonic)
    fence.renewed(clock.monotonic())
    writer = CooldownLease(leases, kit.NAMESPACE, fence)
    now = clock.wall()
    first = cooldowns.value({QUEUE: now + 300}, now)
    writer.write(first)  # creates it
    later = cooldowns.value({QUEUE: now + 600, f"{QUEUE}-2": now + 60}, now)
    writer.write(later)  # patches it

    api = client.CoordinationV1Api(leases)
    selector = f"metadata.name={cooldowns.LEASE}"
    listed = api.list_namespaced_lease(kit.NAMESPACE, field_selector=selector)
    seen = SharedCooldowns()
    seen.replace([api.api_client.sanitize_for_serialization(lease) for lease in listed.items])
    assert seen.entries() == {QUEUE: now + 600, f"{QUEUE}-2": now + 60}

    version = listed.metadata.resource_version
    writer.write(None)  # nothing left cooling: the annotation goes
    stream = watch.Watch().stream(
        api.list_namespaced_lease,
        kit.NAMESPACE,
        field_selector=selector,
        resource_version=version,
        timeout_seconds=10,
    )
    for event in stream:
        seen.upsert(event["raw_object"])
        break
    assert seen.entries() == {}
