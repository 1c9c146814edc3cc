"""Building the Kubernetes API client, and turning its errors into Stowage's.

The client is the official ``kubernetes`` package. It is synchronous, so callers run it in
worker threads. Retries are off: every caller has its own backoff, and urllib3's silent
retries would multiply a timeout.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Protocol

from common.errors import StowageError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, V1ObjectMeta


class KubeError(StowageError):
    """A Kubernetes API call failed; ``status`` is the HTTP status (0 = no answer) and
    ``retry_after_s`` the server's ``Retry-After``, when it sent one (429, some 5xx)."""

    def __init__(self, message: str, status: int = 0, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


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
        built: ApiClient = config.new_client_from_config(
            config_file=kubeconfig, client_configuration=cfg, persist_config=False
        )
        return built
    config.load_incluster_config(client_configuration=cfg)
    return client.ApiClient(cfg)


class Described(Protocol):
    """Any object the API server sends: its client model has a ``metadata``."""

    metadata: V1ObjectMeta | None


def metadata(obj: Described) -> V1ObjectMeta:
    """``obj``'s metadata. The API server always sends it; the client's models allow it to
    be absent, so an object without one is refused here, by name, not deeper in."""
    if obj.metadata is None:
        raise KubeError(f"{type(obj).__name__} without metadata")
    return obj.metadata


def name_of(obj: Described) -> str:
    """``obj``'s name, which the API server always sends (see :func:`metadata`)."""
    name = metadata(obj).name
    if not name:
        raise KubeError(f"{type(obj).__name__} without a name")
    return name


def translate(what: str, e: Exception) -> KubeError:
    """An ApiException or transport error as a KubeError naming the call."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(e, ApiException):
        reason = " ".join(str(_status_message(e.body) or e.reason or "").split())
        return KubeError(
            f"{what}: HTTP {e.status} {reason}".rstrip(),
            e.status or 0,
            _retry_after_s((e.headers or {}).get("Retry-After")),
        )
    return KubeError(f"{what}: {type(e).__name__}: {e}", 0)


def _status_message(body: Any) -> str | None:
    """The ``message`` of the ``Status`` object the API server answers errors with: it
    names what is wrong (``namespaces "x" not found``), the HTTP reason does not."""
    try:
        found = json.loads(body)
    except (TypeError, ValueError):
        return None
    message = found.get("message") if isinstance(found, dict) else None
    return message if isinstance(message, str) and message else None


def _retry_after_s(header: str | None) -> float | None:
    """``Retry-After`` in seconds; the API server sends whole seconds (an HTTP date, which
    it never sends, is ignored: the caller's own backoff applies)."""
    if header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
