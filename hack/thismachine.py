"""This machine as one node of an emulated cluster, with a token for its agent.

``stowage coordinator --standalone`` and the demo both put the machine they run on into
the API emulator as a node and start its real agent against the coordinator; both need the
same node (name, CPUs, memory) and the same kind of token, so they take them from here.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

import psutil

from coordinator.config import CoordinatorSettings
from coordinator.state.cluster import NodeSpec
from hack.kubeapi import KubeApi


def this_machine() -> NodeSpec:
    """This machine as a node: its name (``$NODE_NAME``, else the hostname), the CPUs this
    process may use, and its memory."""
    name = os.environ.get("NODE_NAME") or socket.gethostname()
    cpus = len(os.sched_getaffinity(0))
    return NodeSpec(name=name, cpu_m=cpus * 1000, mem_b=psutil.virtual_memory().total)


def agent_token_file(
    emulator: KubeApi, node: str, settings: CoordinatorSettings, directory: Path
) -> Path:
    """Issue a token the emulator's TokenReview accepts for ``node``'s agent pod (bound to
    the coordinator's namespace and ingest audience, as a projected service-account token
    is) and write it to ``directory/agent-token``, readable by this user only."""
    token = secrets.token_urlsafe(32)
    emulator.add_token(
        token,
        node=node,
        pod=f"stowage-agent-{node}",
        namespace=settings.kube.namespace,
        audiences=[settings.ingest.audience],
    )
    path = directory / "agent-token"
    path.write_text(token)
    path.chmod(0o600)
    return path
