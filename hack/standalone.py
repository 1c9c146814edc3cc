"""``stowage coordinator --standalone``: the coordinator with no cluster.

Starts the Kubernetes API emulator (:mod:`hack.kubeapi`) on 127.0.0.1 in the same process,
holding this machine as a node, and runs the coordinator against it through the same
client code as in a cluster. It issues an agent token (reviewed through the emulator's
TokenReview, like a projected service-account token) and prints the command that connects
this machine's agent.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from common.clock import SystemClock
from common.errors import ConfigError
from coordinator import main as coordinator_main
from coordinator.config import CoordinatorSettings
from coordinator.kube.client import api_client
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from hack.demo.workload import node_fields
from hack.kubeapi import KubeApi
from hack.thismachine import agent_token_file, this_machine


def main(args: argparse.Namespace) -> int:
    try:
        settings = coordinator_main.settings_from(args)
        cluster = LiveCluster(settings, SystemClock(), CoordinatorMetrics())
    except ConfigError as e:
        print(f"stowage coordinator: error: {e}", file=sys.stderr)
        return 2
    return coordinator_main.run(serve(settings, cluster), settings)


async def serve(settings: CoordinatorSettings, cluster: LiveCluster) -> None:
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # the emulator's requests
    emulator = KubeApi()
    await emulator.start()
    try:
        _seed(emulator, settings)
        await coordinator_main.serve(settings, cluster, api_client(host=emulator.url))
    finally:
        await emulator.stop()


def _seed(emulator: KubeApi, settings: CoordinatorSettings) -> None:
    """This machine as a node of the emulated cluster, and a token for its agent."""
    machine = this_machine()
    name = machine.name
    emulator.add_namespace(settings.kube.namespace)
    emulator.add_node(name, **node_fields(machine))
    path = agent_token_file(emulator, name, settings, Path(tempfile.mkdtemp(prefix="stowage-")))
    agent = f"stowage agent --coordinator http://{settings.listen} --token-file {path}"
    print(
        f"standalone: Kubernetes API emulated at {emulator.url}"
        f" (try: kubectl --server {emulator.url} get nodes)\n"
        f"standalone: connect this machine's agent with\n  {agent} --node-name {name}",
        file=sys.stderr,
    )
