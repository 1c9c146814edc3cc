"""A kubeconfig for the emulator, so ``kubectl`` and the coordinator's ``--kubeconfig`` find it.

Written as YAML, as ``kubectl config view`` writes one, with a single cluster, user and
context, that context current, and file mode 0600 since it may hold a bearer token. Note
that kubectl (client-go) sends the token only over TLS: against an ``http://`` emulator
with ``--require-auth`` it is refused ("You must be logged in"), so serve with TLS to use
both (the Python client sends it either way).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

DEFAULT_NAME = "kubeapi"


def write_kubeconfig(
    path: Path | str,
    server: str,
    *,
    token: str | None = None,
    namespace: str = "default",
    ca_file: Path | str | None = None,
    name: str = DEFAULT_NAME,
) -> Path:
    """Write a kubeconfig for ``server`` (``http(s)://host:port``) and return its path.

    ``ca_file`` verifies a TLS server; without it an ``https`` server is not verified
    (``insecure-skip-tls-verify``), as the emulator's certificates are made up on the spot.
    """
    cluster: dict[str, Any] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    elif server.startswith("https:"):
        cluster["insecure-skip-tls-verify"] = True
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token} if token else {}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
        "current-context": name,
        "preferences": {},
    }
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump(config, out, default_flow_style=False, sort_keys=False)
    path.chmod(0o600)  # an existing file keeps its mode through O_CREAT
    return path
