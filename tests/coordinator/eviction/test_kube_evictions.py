"""The eviction call through the real ``kubernetes`` client against the API emulator: what
each answer means, dry run changing nothing, the UID precondition, and the fence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordinator.kube.client import KubeError, api_client
from coordinator.kube.evictions import Evictor, Outcome
from coordinator.kube.leader import Fence, LeaseLost
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import PDBS, PODS
from tests.hosts import FakeClock


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        yield api


@pytest.fixture
def held() -> Fence:
    clock = FakeClock()
    fence = Fence(10.0, clock.monotonic)
    fence.renewed(clock.monotonic())
    return fence


@pytest.fixture
def evictor(kube: KubeApi, held: Fence) -> Iterator[Evictor]:
    with api_client(host=kube.url) as api:
        yield Evictor(api, held)


def uid_of(kube: KubeApi, name: str, namespace: str = "default") -> str:
    return kube.store.get(PODS, namespace, name)["metadata"]["uid"]


def exists(kube: KubeApi, name: str, namespace: str = "default") -> bool:
    return any(p["metadata"]["name"] == name for p in kube.store.list(PODS, namespace)[0])


def test_an_eviction_removes_the_pod(kube: KubeApi, evictor: Evictor) -> None:
    kube.add_pod("web-1", node="worker-1")
    result = evictor.evict("default", "web-1", uid_of(kube, "web-1"), dry_run=False)
    assert result.outcome is Outcome.EVICTED
    assert not exists(kube, "web-1")


def test_a_dry_run_changes_nothing_not_even_the_budget(kube: KubeApi, evictor: Evictor) -> None:
    kube.add_pod("web-1", node="worker-1", labels={"app": "web"})
    kube.add_pdb("web", "default", {"app": "web"}, disruptions_allowed=1)
    rv = kube.store.rv
    result = evictor.evict("default", "web-1", uid_of(kube, "web-1"), dry_run=True)
    assert result.outcome is Outcome.DRY_RUN
    assert kube.store.rv == rv and exists(kube, "web-1")
    assert kube.store.get(PDBS, "default", "web")["status"]["disruptionsAllowed"] == 1


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_budget_that_forbids_it_is_blocked_with_its_reason(
    kube: KubeApi, evictor: Evictor, dry_run: bool
) -> None:
    kube.add_pod("web-1", node="worker-1", labels={"app": "web"})
    kube.add_pod("web-2", node="worker-1", labels={"app": "web"})
    kube.add_pdb("web", "default", {"app": "web"}, disruptions_allowed=0)
    result = evictor.evict("default", "web-1", uid_of(kube, "web-1"), dry_run=dry_run)
    assert result.outcome is Outcome.BLOCKED
    assert result.reason == "The disruption budget web needs 2 healthy pods and has 2 currently"
    assert exists(kube, "web-1")


def test_a_missing_pod_is_gone(kube: KubeApi, evictor: Evictor) -> None:
    kube.add_namespace("default")
    result = evictor.evict("default", "web-9", "some-uid", dry_run=False)
    assert result.outcome is Outcome.GONE
    assert "no longer exists" in result.reason


def test_a_replacement_under_the_same_name_is_not_evicted(kube: KubeApi, evictor: Evictor) -> None:
    kube.add_pod("db-0", node="worker-1")
    old_uid = uid_of(kube, "db-0")
    kube.store.delete(PODS, "default", "db-0")
    kube.add_pod("db-0", node="worker-2")  # the StatefulSet's replacement
    result = evictor.evict("default", "db-0", old_uid, dry_run=False)
    assert result.outcome is Outcome.GONE
    assert "replaced" in result.reason
    assert exists(kube, "db-0")


def test_two_budgets_are_an_error_naming_the_call(kube: KubeApi, evictor: Evictor) -> None:
    kube.add_pod("web-1", node="worker-1", labels={"app": "web", "tier": "front"})
    kube.add_pdb("a", "default", {"app": "web"}, disruptions_allowed=5)
    kube.add_pdb("b", "default", {"tier": "front"}, disruptions_allowed=5)
    with pytest.raises(KubeError, match="evict pod default/web-1: HTTP 500") as caught:
        evictor.evict("default", "web-1", uid_of(kube, "web-1"), dry_run=False)
    assert caught.value.status == 500
    assert exists(kube, "web-1")


def test_no_call_without_the_lease(kube: KubeApi) -> None:
    kube.add_pod("web-1", node="worker-1")
    clock = FakeClock()
    fence = Fence(10.0, clock.monotonic)
    fence.renewed(clock.monotonic())
    clock.advance(10.0)  # renew deadline passed: another replica may lead now
    rv = kube.store.rv
    with api_client(host=kube.url) as api, pytest.raises(LeaseLost):
        Evictor(api, fence).evict("default", "web-1", uid_of(kube, "web-1"), dry_run=False)
    assert kube.store.rv == rv and exists(kube, "web-1")
