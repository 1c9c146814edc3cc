"""``python -m hack.kubeapi`` as a process: it prints its URL, seeds nodes and tokens, writes
a kubeconfig that kubectl and the Python client's loader accept, stops on SIGTERM, and
refuses a busy port or bad arguments in one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
import yaml
from kubernetes import client, config

from hack.kubeapi.__main__ import parse_args
from hack.kubeapi.kubeconfig import write_kubeconfig
from tests.kit import free_port
from tests.kubeapi.kubeapi_support import needs_kubectl


def test_the_module_serves_seeded_nodes_and_tokens(tmp_path):
    config_path = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hack.kubeapi",
            "--listen",
            "127.0.0.1:0",
            "--seed-nodes",
            "2",
            "--token",
            "t1=worker-1",
            "--audience",
            "stowage",
            "--kubeconfig",
            str(config_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("kubeapi serving on http://127.0.0.1:")
        url = line.split()[-1]
        assert yaml.safe_load(config_path.read_text())["clusters"][0]["cluster"]["server"] == url
        with client.ApiClient(client.Configuration(host=url)) as c:
            nodes = client.CoreV1Api(c).list_node().items
            assert [n.metadata.name for n in nodes] == ["worker-1", "worker-2"]
            assert nodes[0].status.addresses[0].address == "10.0.0.1"
            namespaces = {n.metadata.name for n in client.CoreV1Api(c).list_namespace().items}
            assert "stowage-system" in namespaces  # the coordinator's Lease can be created
            body = client.V1TokenReview(
                spec=client.V1TokenReviewSpec(token="t1", audiences=["stowage"])
            )
            status = client.AuthenticationV1Api(c).create_token_review(body).status
            assert status.user.extra["authentication.kubernetes.io/node-name"] == ["worker-1"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        proc.stdout.close()


@needs_kubectl
def test_a_fixed_port_and_a_kubeconfig_kubectl_uses_as_is(tmp_path):
    port = free_port()
    path = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hack.kubeapi", "--listen", f"127.0.0.1:{port}",
         "--seed-nodes", "1", "--admin-token", "s3cret", "--kubeconfig", str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == f"kubeapi serving on http://127.0.0.1:{port}"
        written = yaml.safe_load(path.read_text())
        assert written["current-context"] == "kubeapi"
        assert written["users"] == [{"name": "kubeapi", "user": {"token": "s3cret"}}]
        assert path.stat().st_mode & 0o777 == 0o600  # it holds a token
        env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(path)}
        for args, out in [
            (["config", "current-context"], "kubeapi"),
            (["get", "nodes", "-o", "name"], "node/worker-1"),
        ]:
            done = subprocess.run(
                ["kubectl", "--cache-dir", str(tmp_path / "cache"), *args],
                capture_output=True, text=True, env=env, timeout=60, check=False,
            )  # fmt: skip
            assert (done.returncode, done.stdout.strip()) == (0, out), done.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        proc.stdout.close()


def test_the_python_client_loads_the_written_kubeconfig(kube, tmp_path):
    kube.add_node("worker-1")
    path = write_kubeconfig(tmp_path / "k", kube.url, token="t", namespace="batch")
    loaded = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=loaded)
    assert (loaded.host, loaded.api_key) == (kube.url, {"BearerToken": "Bearer t"})
    with client.ApiClient(loaded) as c:
        assert [n.metadata.name for n in client.CoreV1Api(c).list_node().items] == ["worker-1"]
    context = yaml.safe_load(path.read_text())["contexts"][0]["context"]
    assert context == {"cluster": "kubeapi", "user": "kubeapi", "namespace": "batch"}


def test_an_https_server_without_a_ca_is_not_verified(tmp_path):
    cluster = yaml.safe_load(write_kubeconfig(tmp_path / "k", "https://127.0.0.1:1").read_text())
    assert cluster["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:1",
        "insecure-skip-tls-verify": True,
    }


def test_a_busy_port_is_a_one_line_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "hack.kubeapi", "--listen", f"127.0.0.1:{port}",
             "--kubeconfig", str(tmp_path / "k")],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"python -m hack.kubeapi: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    assert not (tmp_path / "k").exists()


def test_a_kubeconfig_that_cannot_be_written_is_a_one_line_error(tmp_path):
    where = tmp_path / "missing" / "kubeconfig"
    done = subprocess.run(
        [sys.executable, "-m", "hack.kubeapi", "--kubeconfig", str(where)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"python -m hack.kubeapi: error: --kubeconfig {where}: No such file or directory"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "127.0.0.1:http"], "argument --listen: invalid HOST:PORT value"),
        (["--listen", "127.0.0.1:70000"], "argument --listen: invalid HOST:PORT value"),
        (["--token", "no-node"], "--token wants TOKEN=NODE, got 'no-node'"),
        (["--history", "0"], "--history 0: expected at least 1"),
        (["--seed-nodes", "-1"], "--seed-nodes -1: expected 0..254"),
        (["--seed-nodes", "255"], "--seed-nodes 255: expected 0..254"),
    ],
)
def test_bad_arguments_are_usage_errors(args, message, capsys):
    with pytest.raises(SystemExit) as exited:
        parse_args(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


def test_listen_defaults_to_loopback():
    assert parse_args(["--listen", ":6443"]).listen == ("127.0.0.1", 6443)
