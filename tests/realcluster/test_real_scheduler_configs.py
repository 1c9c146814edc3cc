"""The shipped KubeSchedulerConfigurations read by the real kube-scheduler of the pinned
release (``--write-config-to``: it decodes the file strictly, defaults and validates it,
builds the extenders, writes what it would run with, and exits).

Checked by real code: every ``kubescheduler.config.k8s.io/v1`` file (Kubernetes 1.25 and
later; this release reads no other version). The ``v1beta1``–``v1beta3`` files are for
releases that do not build with this project's Go, and are checked against their schema
only (``tests/deploy/test_scheduler_configs.py``); this release refuses them, as it should.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.cluster import scheduling
from hack.cluster.controlplane import ControlPlane

V1_FILES = sorted(
    p
    for p in scheduling.SCHEDULER_CONFIGS.rglob("kube-scheduler-config.yaml")
    if yaml.safe_load(p.read_text())["apiVersion"] == "kubescheduler.config.k8s.io/v1"
)
OLDER_FILES = sorted(
    set(scheduling.SCHEDULER_CONFIGS.rglob("kube-scheduler-config.yaml")) - set(V1_FILES)
)


def read_back(
    plane: ControlPlane, config: dict[str, Any], out: Path
) -> subprocess.CompletedProcess[str]:
    """kube-scheduler's verdict on ``config`` (its client pointed at this control plane:
    the only field set here)."""
    config = {
        **config,
        "clientConnection": {"kubeconfig": str(plane.root / "kube-scheduler.kubeconfig")},
    }
    source = out / "config.yaml"
    source.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [
            str(plane.bin_dir / "kube-scheduler"),
            f"--config={source}",
            f"--write-config-to={out / 'effective.yaml'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def tls_files(directory: Path, plane: ControlPlane) -> dict[str, Path]:
    """Files where an mTLS config names its CA, certificate and key (they must exist for
    kube-scheduler to build the extender's client)."""
    issued = plane.ca.issue_cert("stowage-scheduler")
    files = {
        "caFile": directory / "ca.crt",
        "certFile": directory / "tls.crt",
        "keyFile": directory / "tls.key",
    }
    plane.ca.cert_pem.write_to_path(str(files["caFile"]))
    issued.cert_chain_pems[0].write_to_path(str(files["certFile"]))
    issued.private_key_pem.write_to_path(str(files["keyFile"]))
    return files


@pytest.mark.parametrize(
    "path", V1_FILES, ids=lambda p: str(p.relative_to(scheduling.SCHEDULER_CONFIGS))
)
def test_kube_scheduler_runs_with_each_shipped_v1_config(
    control_plane: ControlPlane, path: Path, tmp_path: Path
) -> None:
    shipped = yaml.safe_load(path.read_text())
    config = yaml.safe_load(path.read_text())
    for extender in config.get("extenders", ()):
        if "tlsConfig" in extender:  # the Secret's mount path, here files of the test CA
            extender["tlsConfig"].update(
                {k: str(v) for k, v in tls_files(tmp_path, control_plane).items()}
            )
    answer = read_back(control_plane, config, tmp_path)
    assert answer.returncode == 0, answer.stderr[-2000:]
    effective = yaml.safe_load((tmp_path / "effective.yaml").read_text())
    assert [e["urlPrefix"] for e in effective.get("extenders", ())] == [
        e["urlPrefix"] for e in shipped.get("extenders", ())
    ]
    profiles = shipped.get("profiles") or [{"schedulerName": "default-scheduler"}]
    assert [p["schedulerName"] for p in effective["profiles"]] == [
        p["schedulerName"] for p in profiles
    ]


def test_kube_scheduler_refuses_an_unknown_field(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The check above can fail: the same file with one field kube-scheduler does not know."""
    config = yaml.safe_load(V1_FILES[0].read_text())
    config["extenders"][0]["managedResource"] = [
        {"name": "nvidia.com/gpu"}
    ]  # the real key is plural
    answer = read_back(control_plane, config, tmp_path)
    assert answer.returncode != 0
    assert "unknown field" in answer.stderr


@pytest.mark.parametrize(
    "path", OLDER_FILES, ids=lambda p: str(p.relative_to(scheduling.SCHEDULER_CONFIGS))
)
def test_this_release_refuses_the_configs_for_older_releases(
    control_plane: ControlPlane, path: Path, tmp_path: Path
) -> None:
    answer = read_back(control_plane, yaml.safe_load(path.read_text()), tmp_path)
    assert answer.returncode != 0
    assert "no kind" in answer.stderr and "is registered for version" in answer.stderr
