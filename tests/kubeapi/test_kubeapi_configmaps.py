"""ConfigMaps in the emulator, as the approval of a preemption plan uses them: created with
``generateName`` from JSON on stdin by ``kubectl create -f -``, found by label in one
namespace, shown by ``kubectl get`` with the apiserver's columns."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException


def configmap(name: str, namespace: str = "default", **labels: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"a": "1", "b": "2"},
    }


def test_a_configmap_is_created_read_and_listed_by_label_in_its_namespace(kube, core):
    kube.add_namespace("other")
    core.create_namespaced_config_map("default", configmap("one", app="x"))
    core.create_namespaced_config_map("default", configmap("two", app="y"))
    core.create_namespaced_config_map("other", configmap("three", "other", app="x"))
    assert core.read_namespaced_config_map("one", "default").data == {"a": "1", "b": "2"}
    found = core.list_namespaced_config_map("default", label_selector="app=x").items
    assert [cm.metadata.name for cm in found] == ["one"]
    everywhere = core.list_config_map_for_all_namespaces(label_selector="app=x").items
    assert sorted(cm.metadata.name for cm in everywhere) == ["one", "three"]


def test_a_configmap_in_a_missing_namespace_is_refused(core):
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map("nowhere", configmap("one", "nowhere"))
    assert refused.value.status == 404


def test_kubectl_creates_one_from_stdin_with_generate_name(kube, core, kubectl):
    body = configmap("", app="x")
    body["metadata"] = {"generateName": "made-", "labels": {"app": "x"}}
    out = kubectl("create", "-n", "default", "-f", "-", stdin=json.dumps(body))
    (made,) = core.list_namespaced_config_map("default", label_selector="app=x").items
    assert made.metadata.name.startswith("made-") and len(made.metadata.name) == 10
    assert out == f"configmap/{made.metadata.name} created\n"


def test_kubectl_get_configmaps_shows_name_data_and_age(kube, core, kubectl):
    core.create_namespaced_config_map("default", configmap("one"))
    lines = kubectl("get", "configmaps", "-n", "default").splitlines()
    assert lines[0].split() == ["NAME", "DATA", "AGE"]
    assert lines[1].split()[:2] == ["one", "2"]


def test_configmaps_are_discovered_under_their_short_name(core, kubectl):
    core.create_namespaced_config_map("default", configmap("one"))
    assert kubectl("get", "cm", "-n", "default", "-o", "name") == "configmap/one\n"


def test_delete_removes_it(core):
    core.create_namespaced_config_map("default", configmap("one"))
    core.delete_namespaced_config_map("one", "default")
    assert core.list_namespaced_config_map("default").items == []
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("one", "default")
    assert gone.value.status == 404
