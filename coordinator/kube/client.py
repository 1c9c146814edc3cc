"""Building the Kubernetes API client, and turning its errors into Stowage's.

The client is the official ``kubernetes`` package. It is synchronous, so callers run it in
worker threads. Retries are off: every caller has its own backoff, and urllib3's silent
retries would multiply a timeout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.errors import StowageError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient


class KubeError(StowageError):
    """A Kubernetes API call failed; ``status`` is the HTTP status (0 = no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def api_client(kubeconfig: str | None = None, host: str | None = None) -> ApiClient:
    """A client for ``host`` (plain, e.g. the standalone emulator), a kubeconfig file, or
    the in-cluster service account, in that order of preference."""
    from kubernetes import client, config

    cfg = client.Configuration()
    cfg.retries = False
    if host is not None:
        cfg.host = host
        return client.ApiClient(cfg)
    if kubeconfig is not None:
        return config.new_client_from_config(
            config_file=kubeconfig, client_configuration=cfg, persist_config=False
        )
    config.load_incluster_config(client_configuration=cfg)
    return client.ApiClient(cfg)


def translate(what: str, e: Exception) -> KubeError:
    """An ApiException or transport error as a KubeError naming the call."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(e, ApiException):
        reason = " ".join(str(e.reason or "").split())
        return KubeError(f"{what}: HTTP {e.status} {reason}".rstrip(), e.status or 0)
    return KubeError(f"{what}: {type(e).__name__}: {e}", 0)
