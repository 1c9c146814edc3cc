"""The Volcano PodGroup reflector where Volcano is not installed: the emulated API server,
like a real one without the CRD, answers the PodGroup list with its generic 404. The
coordinator takes that as no PodGroups (every pod's queue is then its namespace), says so
once, keeps trying now and then, and nothing else is held up."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from coordinator.config import KubeSettings
from coordinator.eviction.answers import queue_of
from coordinator.eviction.view import view_of
from tests.coordinator.eviction.evictrig import EvictRig, pod, podgroup
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/podgroups"


async def test_without_volcano_every_pod_s_queue_is_its_namespace_said_once(
    api: rig.RecordingKubeApi, start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="coordinator.kube.watches")
    settings = dataclasses.replace(
        rig.settings(), kube=KubeSettings(namespace=rig.NAMESPACE, resync_s=0.2)
    )
    api.add_node("gpu-a")
    c = await start(settings)
    await rig.eventually(c.services.synced.is_set, "the Node and Pod caches synced")
    # A PodGroup left over from before (as if the CRD had been removed): the next
    # answer, a 404, takes it away.
    c.cluster.podgroups.upsert(podgroup("job", "research"))

    def lists() -> list[rig.Seen]:
        return [s for s in api.seen if s.path == PODGROUPS and s.query.get("watch") != "true"]

    await rig.eventually(lambda: len(lists()) >= 4, "the PodGroup list tried again")
    assert {s.status for s in lists()} == {404}
    assert not [s for s in api.seen if s.path == PODGROUPS and s.query.get("watch") == "true"]
    assert c.cluster.podgroups.queues().by_group == {}
    gang = EvictRig().facts(
        pod("member", namespace="team-a", annotations={"scheduling.k8s.io/group-name": "job"})
    )
    view = view_of(c.cluster)
    assert view is not None
    assert queue_of(view, gang, settings.evictions, 0.0) == "team-a"
    said = [r for r in caplog.records if "watch podgroups" in r.getMessage()]
    assert [r.getMessage().split(" (")[0] for r in said] == ["watch podgroups: not served"]
    assert "HTTP 404" in said[0].getMessage()
    for cause in ("error", "expired"):
        labels = {"resource": "podgroups", "cause": cause}
        assert c.metric("stowage_watch_restarts_total", labels) == 0
