"""The real coordinator against an API server that fails as real ones do (faults injected
in the emulator): refused and throttled patches, slow answers, slow Lease calls, watches
cut mid-stream, a 410 forcing a relist while updates happen, failing lists. After each:
every annotation update lands exactly once (a timed-out one at most twice, with the same
body), the caches converge on the API server's objects, nothing loops hot."""

from __future__ import annotations

import dataclasses

import pytest

from common import annotations as ann
from coordinator.config import CoordinatorSettings, PatrolSettings
from coordinator.kube import publisher
from hack.kubeapi.faults import Fault
from hack.kubeapi.resources import NODES
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

GIB = rig.GIB
NODE = "worker-1"
NODE_PATH = f"/api/v1/nodes/{NODE}"
NODES_PATH = "/api/v1/nodes"


def answered(api: rig.RecordingKubeApi, method: str, path: str, status: int) -> list[rig.Seen]:
    return [s for s in api.seen if (s.method, s.path, s.status) == (method, path, status)]


def without_patrol() -> CoordinatorSettings:
    """The rig's settings with the patrol off: a new leader's patrol lists the Nodes once
    for its marks, which the tests counting the node watch's own lists must not see."""
    return dataclasses.replace(rig.settings(), patrol=PatrolSettings(enabled=False))


def lists(api: rig.RecordingKubeApi, path: str) -> list[rig.Seen]:
    return [s for s in api.seen if s.method == "GET" and s.path == path and "watch" not in s.query]


async def publishing(api: rig.RecordingKubeApi, start: Start) -> tuple[rig.Coordinator, str]:
    """A leader that has published NODE once (no report yet), and NODE's agent token."""
    api.add_node(NODE, capacity={"cpu": "16", "memory": "64Gi"})
    coordinator = await start(rig.settings())
    await rig.eventually(lambda: api.patches(NODE), "the first patch")
    return coordinator, api.agent_token(NODE)


@pytest.mark.parametrize(
    ("code", "retry_after_s", "times"),
    [(409, 0, 2), (429, 1, 1), (500, 0, 2), (503, 0, 1), (404, 0, 1), (422, 0, 1)],
)
async def test_a_refused_or_throttled_patch_is_retried_and_lands_exactly_once(
    api: rig.RecordingKubeApi,
    start: Start,
    monkeypatch: pytest.MonkeyPatch,
    code: int,
    retry_after_s: int,
    times: int,
) -> None:
    # Backoffs shortened (their values are tested on a fake clock); Retry-After is not.
    monkeypatch.setattr(publisher, "NODE_BACKOFF_S", 0.1)
    monkeypatch.setattr(publisher, "HOLD_S", 0.1)
    coordinator, token = await publishing(api, start)
    fault = api.faults.add(
        Fault.error(
            code, retry_after_s=retry_after_s, method="PATCH", path=f"^{NODE_PATH}$", times=times
        )
    )
    report = rig.node_report(NODE, free_2mib_b=20 * GIB)
    assert (await coordinator.report(report, token))[0] == 200
    await rig.eventually(
        lambda: rig.contiguity(api.annotations(NODE)) == "20.00Gi", "published", timeout_s=15.0
    )
    await rig.publisher_ticks(coordinator, 3)
    assert fault.hits == times
    assert len(answered(api, "PATCH", NODE_PATH, code)) == times
    accepted = api.patches(NODE)
    assert len(accepted) == 2  # the first (no report yet), then 20 GiB once: no duplicate
    assert coordinator.metric("stowage_node_patches_total", {"result": "error"}) == times
    assert coordinator.metric("stowage_node_patches_total", {"result": "ok"}) == 2


async def test_a_patch_that_timed_out_is_resent_alike_and_later_changes_land_once(
    api: rig.RecordingKubeApi, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server holds the patch past the client's timeout and applies it anyway: the
    publisher cannot know, so it sends the same values again (the fullness stamped a moment
    later, maybe) — an idempotent merge patch.

    Only that patch is sent with a short timeout (the patcher reads it as each call starts):
    any other patch may take its time, as on a loaded machine, without timing out too."""
    shipped = publisher.PATCH_TIMEOUT_S
    coordinator, token = await publishing(api, start)
    fault = api.faults.add(Fault.slow(1.0, method="PATCH", path=f"^{NODE_PATH}$"))
    monkeypatch.setattr(publisher, "PATCH_TIMEOUT_S", 0.3)
    report = rig.node_report(NODE, free_2mib_b=20 * GIB)
    assert (await coordinator.report(report, token))[0] == 200
    await rig.eventually(lambda: fault.hits == 1, "the patch held by the API server")
    monkeypatch.setattr(publisher, "PATCH_TIMEOUT_S", shipped)  # the resend and later ones

    def both_landed() -> bool:
        sent = [p.body["metadata"]["annotations"] for p in api.patches(NODE)[1:]]
        return (
            len(sent) == 2
            and sent[0].keys() == sent[1].keys()
            and all(
                rig.contiguity(a) == "20.00Gi" and a[ann.STATE].startswith("fresh") for a in sent
            )
        )

    await rig.eventually(both_landed, "the late patch and its identical resend", timeout_s=10.0)
    assert fault.hits == 1
    assert coordinator.metric("stowage_node_patches_total", {"result": "error"}) == 1
    assert rig.contiguity(api.annotations(NODE)) == "20.00Gi"
    report = rig.node_report(NODE, free_2mib_b=10 * GIB, seq=2)
    assert (await coordinator.report(report, token))[0] == 200
    await rig.eventually(lambda: rig.contiguity(api.annotations(NODE)) == "10.00Gi", "published")
    await rig.publisher_ticks(coordinator, 3)
    assert len(api.patches(NODE)) == 4


async def test_a_lease_call_slower_than_the_renew_deadline_makes_the_leader_step_down(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    """The elector gives up on the call at the renew deadline (it could not keep the lease
    with a later answer), stops leading, and leads again once the Lease answers."""
    coordinator, _ = await publishing(api, start)
    api.faults.add(Fault.slow(2.5, method="GET", path=r"/leases/"))
    await rig.eventually(lambda: not coordinator.leading, "stepped down", timeout_s=5.0)
    assert not coordinator.services.leader.is_set()
    await rig.eventually(lambda: coordinator.leading, "leads again", timeout_s=5.0)


async def test_dropped_node_watches_are_resumed_and_no_change_is_lost(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    """The first two node watches are cut after their first event."""
    api.add_node("worker-1", capacity={"cpu": "16", "memory": "64Gi"})
    fault = api.faults.add(Fault.drop_watch(after=1, path=f"^{NODES_PATH}$", times=2))
    coordinator = await start(without_patrol())
    await rig.eventually(lambda: coordinator.services.synced.is_set(), "caches synced")
    restarts = {"resource": "nodes", "cause": "error"}
    for drop in (1, 2):
        api.add_node(f"worker-{drop + 1}", capacity={"cpu": str(drop + 1), "memory": "8Gi"})
        await rig.eventually(
            lambda drop=drop: coordinator.metric("stowage_watch_restarts_total", restarts) == drop,
            f"watch cut {drop}",
        )
    for i in range(4, 6):
        api.add_node(f"worker-{i}", capacity={"cpu": str(i), "memory": "8Gi"})
    api.store.delete(NODES, "", "worker-3")

    def converged() -> bool:
        names = {n["metadata"]["name"] for n in api.store.list(NODES, None)[0]}
        return set(coordinator.cluster.specs) == names

    await rig.eventually(converged, "the node cache matches the API server")
    assert fault.hits == 2
    assert coordinator.cluster.specs["worker-5"].cpu_m == 5000
    assert coordinator.metric("stowage_watch_restarts_total", restarts) == 2
    assert len(lists(api, NODES_PATH)) == 3  # the first list, and one relist per drop


async def test_a_410_mid_update_relists_and_the_cache_ends_as_the_api_server(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    """The first node watch delivers one change, then is told its resourceVersion is too
    old; while the relist is held, nodes are added, changed and deleted."""
    for i in (1, 2):
        api.add_node(f"worker-{i}", capacity={"cpu": "16", "memory": "64Gi"})
    fault = api.faults.add(Fault.expire_watch(after=1, path=f"^{NODES_PATH}$"))
    coordinator = await start(rig.settings())
    await rig.eventually(lambda: coordinator.services.synced.is_set(), "caches synced")
    release = api.hold_lists(NODES_PATH)
    api.add_node("worker-3", capacity={"cpu": "3", "memory": "8Gi"})  # delivered, then 410
    expired = {"resource": "nodes", "cause": "expired"}
    await rig.eventually(
        lambda: coordinator.metric("stowage_watch_restarts_total", expired) == 1, "the 410"
    )
    api.add_node("worker-4", capacity={"cpu": "4", "memory": "8Gi"})
    api.store.delete(NODES, "", "worker-1")

    def smaller(node: dict) -> dict:
        node["status"]["allocatable"]["cpu"] = "2"
        return node

    api.store.update(NODES, "", "worker-2", smaller)
    release.set()
    api.add_node("worker-5", capacity={"cpu": "5", "memory": "8Gi"})  # after the relist

    def converged() -> bool:
        specs = coordinator.cluster.specs
        return set(specs) == {"worker-2", "worker-3", "worker-4", "worker-5"} and (
            specs["worker-2"].cpu_m == 2000
        )

    await rig.eventually(converged, "the node cache matches the API server")
    assert fault.hits == 1
    assert coordinator.metric("stowage_watch_restarts_total", expired) == 1
    errors = {"resource": "nodes", "cause": "error"}
    assert coordinator.metric("stowage_watch_restarts_total", errors) == 0
    assert len(lists(api, NODES_PATH)) == 2


async def test_failing_lists_are_retried_with_backoff_until_the_caches_fill(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    api.add_node("worker-1", capacity={"cpu": "16", "memory": "64Gi"})
    fault = api.faults.add(Fault.error(500, method="GET", path=f"^{NODES_PATH}$", times=2))
    coordinator = await start(without_patrol())
    await rig.eventually(lambda: coordinator.services.synced.is_set(), "caches synced")
    assert fault.hits == 2
    assert [s.status for s in lists(api, NODES_PATH)] == [500, 500, 200]
    assert set(coordinator.cluster.specs) == {"worker-1"}
