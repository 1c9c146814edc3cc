"""``python -m hack.kubeapi`` as a process: it prints its URL, seeds nodes and tokens, and
stops on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from kubernetes import client


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
        assert json.loads(config_path.read_text())["clusters"][0]["cluster"]["server"] == url
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
