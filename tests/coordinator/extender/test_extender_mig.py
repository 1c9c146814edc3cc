"""``/debug/explain``'s MIG verdict over a live cluster: the Node's advertised instances,
what its bound pods request, and the agent's report of each GPU's instances."""

from __future__ import annotations

from typing import Any

import msgspec

from common.schema import MigDevice
from coordinator.nodeview import NodeView
from coordinator.state.reports import signals_of
from tests.coordinator.extender.conftest import Rig
from tests.coordinator.extender.kubejson import node, pod
from tests.kit import build_report

THREE_G = "nvidia.com/mig-3g.40gb"
ONE_G = "nvidia.com/mig-1g.10gb"


def mig_node(name: str, **instances: int) -> dict[str, Any]:
    out = node(name, "64", "512Gi")
    out["status"]["allocatable"].update({k: str(v) for k, v in instances.items()})
    return out


def mig_pod(name: str, resource: str, count: int = 1, node_name: str | None = None) -> dict:
    out = pod(name=name, uid=f"uid-{name}")
    out["spec"]["containers"][0]["resources"]["limits"] = {resource: str(count)}
    if node_name is not None:
        out["spec"]["nodeName"] = node_name
        out["status"]["phase"] = "Running"
    return out


def explain(rig: Rig, name: str, node_name: str) -> Any:
    return rig.cluster.explain(rig.cluster.pods[f"ns/{name}"], node_name)


def test_free_instances_are_the_nodes_less_its_pods(rig: Rig) -> None:
    rig.cluster.upsert_node(mig_node("mig-1", **{THREE_G: 2, ONE_G: 1}))
    rig.cluster.upsert_pod(mig_pod("running", THREE_G, node_name="mig-1"))
    rig.cluster.upsert_pod(mig_pod("other-node", THREE_G, node_name="node-a"))
    rig.cluster.upsert_pod(mig_pod("p", THREE_G))
    mig = explain(rig, "p", "mig-1")["mig"]
    assert mig["strategy"] == "mixed"
    assert mig["asks"] == [{"resource": THREE_G, "profile": "3g.40gb", "count": 1}]
    assert mig["instances"] == {
        ONE_G: {"profile": "1g.10gb", "on_node": 1, "in_use": 0, "free": 1},
        THREE_G: {"profile": "3g.40gb", "on_node": 2, "in_use": 1, "free": 1},
    }
    assert (mig["verdict"], mig["unresolvable"]) == ("fits", False)
    rig.cluster.upsert_pod(mig_pod("second", THREE_G, node_name="mig-1"))
    mig = explain(rig, "p", "mig-1")["mig"]
    assert mig["verdict"] == f"MIG: 0 {THREE_G} (3g.40gb) free < 1 requested"
    assert not mig["unresolvable"]


def test_a_profile_the_node_lacks_is_unresolvable(rig: Rig) -> None:
    rig.cluster.upsert_node(mig_node("mig-1", **{ONE_G: 7}))
    rig.cluster.upsert_pod(mig_pod("p", THREE_G, count=2))
    mig = explain(rig, "p", "mig-1")["mig"]
    assert mig["verdict"] == f"MIG: 0 {THREE_G} (3g.40gb) on the node < 2 requested"
    assert mig["unresolvable"]


def test_no_mig_no_section(rig: Rig) -> None:
    rig.cluster.upsert_pod(pod())
    assert "mig" not in explain(rig, "p", "node-a")


def test_a_single_strategy_node_the_plugin_refuses(rig: Rig) -> None:
    """The agent's report says its GPUs hold two profiles: the single strategy's plugin
    offers nothing there, whatever the Node still shows."""
    rig.cluster.upsert_node(mig_node("mig-s", **{"nvidia.com/gpu": 2}))
    report = build_report("mig-s", gpus=2)
    assert not isinstance(report.gpus, str)
    devices = [
        msgspec.structs.replace(
            d,
            mig_enabled=True,
            mig_devices=[
                MigDevice(
                    uuid=f"MIG-{d.index}",
                    gpu_instance_id=1,
                    compute_instance_id=0,
                    mem_total_b=None,
                    profile=profile,
                )
            ],
        )
        for d, profile in zip(report.gpus.devices, ("1g.10gb", "2g.20gb"), strict=True)
    ]
    report = msgspec.structs.replace(
        report, gpus=msgspec.structs.replace(report.gpus, devices=devices)
    )
    rig.set_signals("mig-s", mig_gpus=signals_of(report).mig_gpus)
    rig.cluster.upsert_pod(pod(gpus=1))
    mig = explain(rig, "p", "mig-s")["mig"]
    assert mig["strategy"] == "single"
    assert mig["asks"] == [{"resource": "nvidia.com/gpu", "profile": None, "count": 1}]
    assert mig["gpus"] == [
        {"index": 0, "mig_enabled": True, "instances": ["1g.10gb"]},
        {"index": 1, "mig_enabled": True, "instances": ["2g.20gb"]},
    ]
    assert mig["verdict"] == "MIG: single strategy: more than one MIG profile (1g.10gb, 2g.20gb)"
    assert mig["unresolvable"]


def test_signals_carry_mig_gpus_only_for_a_node_with_mig_on() -> None:
    """A node without MIG holds nothing for it (one report a node per cycle)."""
    assert signals_of(build_report("plain", gpus=2)).mig_gpus == ()


def test_the_node_view_shows_free_instances_per_profile(rig: Rig) -> None:
    """The tile ``/debug/nodes``, ``/ui`` and ``stowage top`` read."""
    rig.cluster.upsert_node(mig_node("mig-1", **{THREE_G: 2, ONE_G: 1}))
    rig.cluster.upsert_pod(mig_pod("running", THREE_G, node_name="mig-1"))
    rig.cluster.upsert_pod(mig_pod("elsewhere", ONE_G, node_name="node-a"))
    tiles = {t["name"]: t for t in NodeView(rig.cluster).tiles(["mig-1", "node-a"])}
    assert tiles["mig-1"]["mig_free"] == "1g.10gb 1/1, 3g.40gb 1/2"
    assert tiles["node-a"]["mig_free"] is None


class Unread(dict):
    def values(self):  # type: ignore[override]
        raise AssertionError("the pods were read for a view without a MIG node")


def test_a_view_without_mig_nodes_reads_no_pods(rig: Rig) -> None:
    """The pods are read for ``mig_free`` only when a node shown has MIG instances."""
    rig.cluster.upsert_pod(pod())
    rig.cluster.facts = Unread(rig.cluster.facts)
    assert all(t["mig_free"] is None for t in NodeView(rig.cluster).tiles())


FILTER = "/scheduler/filter"


async def test_filter_refuses_nodes_without_a_free_instance_of_the_profile(rig: Rig) -> None:
    """mig-1's one 3g is taken, mig-2 has only 1g instances, mig-3 has a 3g free; node-new
    is not known (passes, as every node we know nothing against)."""
    rig.cluster.upsert_node(mig_node("mig-1", **{THREE_G: 1, ONE_G: 4}))
    rig.cluster.upsert_node(mig_node("mig-2", **{ONE_G: 7}))
    rig.cluster.upsert_node(mig_node("mig-3", **{THREE_G: 2}))
    rig.cluster.upsert_pod(mig_pod("running", THREE_G, node_name="mig-1"))
    rig.cluster.upsert_pod(mig_pod("elsewhere", THREE_G, node_name="mig-3"))
    body = {"Pod": mig_pod("p", THREE_G), "NodeNames": ["mig-1", "mig-2", "mig-3", "node-new"]}
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply["NodeNames"] == ["mig-3", "node-new"]
    lacking = f"MIG: 0 {THREE_G} (3g.40gb) on the node < 1 requested"
    assert reply["FailedNodes"] == {
        "mig-1": f"MIG: 0 {THREE_G} (3g.40gb) free < 1 requested",
        "mig-2": lacking,  # also here, for clients < 1.21
    }
    assert reply["FailedAndUnresolvableNodes"] == {"mig-2": lacking}
    # A pod asking for no MIG instance is not judged on them.
    status, reply = await rig.post(FILTER, {"Pod": pod(), "NodeNames": ["mig-1", "mig-2"]})
    assert reply["NodeNames"] == ["mig-1", "mig-2"]


async def test_a_pod_asking_for_too_many_mig_resources_is_refused() -> None:
    from coordinator.state.kubeobjects import MAX_MIG_ASKS, ObjectError, pod_request

    many = pod()
    many["spec"]["containers"][0]["resources"]["limits"] = {
        f"nvidia.com/mig-{k}g.{k}0gb": "1" for k in range(1, MAX_MIG_ASKS + 2)
    }
    try:
        pod_request(many, 0)
    except ObjectError as e:
        assert str(e) == f"pod ns/p: {MAX_MIG_ASKS + 1} MIG resources requested, more than 16"
    else:
        raise AssertionError("accepted")
    many["spec"]["containers"][0]["resources"]["limits"] = {THREE_G: "2", ONE_G: "1"}
    assert pod_request(many, 0).mig == ((ONE_G, 1), (THREE_G, 2))
