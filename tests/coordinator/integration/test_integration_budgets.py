"""The PodDisruptionBudget reflector against the emulated API server (real client,
``policy/v1``): budgets listed, changed and deleted there show up in what the eviction
planner reads, and nothing is planned until they were first listed."""

from __future__ import annotations

from typing import Any

from hack.kubeapi.resources import PDBS
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start


def allowed(coordinator: rig.Coordinator) -> dict[str, int]:
    return {k: b.allowed for k, b in coordinator.cluster.budgets.by_key.items()}


def spend(pdb: dict[str, Any]) -> dict[str, Any]:
    pdb["status"]["disruptionsAllowed"] = 0
    return pdb


async def test_budgets_in_the_api_server_flow_into_the_planner_s_view(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    api.add_pdb("web", "shop", {"app": "web"}, disruptions_allowed=2)
    c = await start()
    await rig.eventually(lambda: c.cluster.budgets.synced, "budgets listed")
    assert allowed(c) == {"shop/web": 2}
    api.add_pdb("db", "shop", {"app": "db"}, disruptions_allowed=1)
    await rig.eventually(lambda: allowed(c) == {"shop/web": 2, "shop/db": 1}, "db added")
    api.store.update(PDBS, "shop", "web", spend)
    await rig.eventually(lambda: allowed(c)["shop/web"] == 0, "web spent")
    api.store.delete(PDBS, "shop", "db")
    await rig.eventually(lambda: allowed(c) == {"shop/web": 0}, "db deleted")
    restarts = {"resource": "poddisruptionbudgets", "cause": "error"}
    assert c.metric("stowage_watch_restarts_total", restarts) == 0
