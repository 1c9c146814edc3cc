"""Pods bound to this node, with requests and limits counted the way the scheduler counts them.

The coordinator compares what the node really has (the other sections) with what its pods
hold, so each pod's requests and limits follow Kubernetes' ``PodRequests``/``PodLimits``
(``k8s.io/component-helpers/resource``): containers summed, init containers and sidecars
folded in, pod-level resources and ``spec.overhead`` applied. Sums are exact and rounded
up once at the end, as Go's ``MilliValue()``/``Value()`` round the summed quantity.

Sources (``--pods-source``):

* ``apiserver`` lists ``spec.nodeName=<node>`` with ``resourceVersion=0``, so the API
  server answers from its watch cache: a whole fleet lists every interval, and a quorum
  read from etcd per node per cycle is what the watch cache exists to avoid.
* ``kubelet`` GETs the kubelet's ``/pods`` (the same PodList), for nodes whose agent may
  not talk to the API server.
* ``auto`` picks the API server in a cluster or with a kubeconfig, else the kubelet.

Static pods and their mirrors are marked ``static`` (never best-effort, :mod:`common.qos`)
from the annotations only the kubelet controls, which differ by source (``_static``).

Each pod's NUMA nodes (``numa_nodes``) are read from its containers' cpusets
(:mod:`agent.podnuma`), for the coordinator's tenancy rule; a pod whose cpuset cannot be
read or mapped goes without them.

Outcomes: an unreachable source (refused, timed out, 5xx, 429) is ``NoData`` — the
section is absent, never empty; 401/403 is a ``CollectorError``, because missing RBAC or
a bad token is a real failure that someone must fix. Tokens are never logged.

The ``kubernetes`` package (about 10 MB of RSS) is imported only when a source is first
used, so an agent running with ``--pods-source=none`` never pays for it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import urlparse

from msgspec import structs

from agent.collectors import base
from agent.kernelfiles import CollectorError, read_text
from agent.podnuma import PodNuma
from agent.podusage import PodUsageSampler
from agent.settings import AgentSettings, PodsSettings
from common import codec, podspec
from common.clock import Clock
from common.errors import QuantityError, SchemaError
from common.schema import Absent, PodInfo, PodsSection, PodUsage, Resources

if TYPE_CHECKING:
    from kubernetes.client import ApiClient
    from urllib3 import BaseHTTPResponse

NAME: Final = "pods"

log = logging.getLogger(__name__)

_TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
"""Finished pods hold no resources; the scheduler does not count them either."""
_MAX_LABEL_VALUE: Final = 4096
"""The schema's ``Text`` cap. A longer annotation value is dropped, not the whole pod."""
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
"""On a static pod's mirror on the API server (the kubelet's ``ConfigMirrorAnnotationKey``)."""
SOURCE_ANNOTATION: Final = "kubernetes.io/config.source"
"""Where the kubelet got a pod: ``api``, ``file`` or ``http`` (``ConfigSourceAnnotationKey``)."""


def choose_source(pods: PodsSettings, environ: Mapping[str, str]) -> str:
    """``apiserver`` or ``kubelet`` for these settings, or raise NoData if there is none."""
    if pods.source == "none":
        raise base.NoData("pods-disabled")
    if pods.source != "auto":
        return pods.source
    if environ.get("KUBERNETES_SERVICE_HOST") or pods.kubeconfig:
        return "apiserver"
    if pods.kubelet_url:
        return "kubelet"
    raise base.NoData("pods-source-unavailable: not in a cluster, no kubeconfig, no kubelet URL")


class PodsCollector:
    """Lists this node's pods each cycle through one reused client (a pooled connection)."""

    name = NAME

    def __init__(
        self,
        settings: PodsSettings,
        node_name: str,
        clock: Clock,
        environ: Mapping[str, str] | None = None,
        usage: PodUsageSampler | None = None,
        numa: PodNuma | None = None,
    ) -> None:
        self._settings = settings
        self._usage = usage
        self._numa = numa
        """Reads the NUMA nodes each pod runs on from its cpusets; None: not read."""
        """Measures each pod's use from its cgroup; None: not measured."""
        self.pod_usage: dict[str, PodUsage] | Absent | None = None
        """The use of the pods of the section :meth:`collect` last returned, read in the
        same call (the report's ``pod_usage``); None while not measured."""
        self._node = node_name
        self._clock = clock
        self._environ = os.environ if environ is None else environ
        self._client: ApiClient | None = None
        self._bad_pods: frozenset[str] = frozenset()

    def collect(self) -> PodsSection:
        source = choose_source(self._settings, self._environ)
        fetch = self._list_from_apiserver if source == "apiserver" else self._list_from_kubelet
        pod_list = _translate_errors(source, fetch)
        measured_at = self._clock.wall()
        items = pod_list.get("items") if isinstance(pod_list, dict) else None
        if not isinstance(items, list):
            raise CollectorError(f"pods: {source} sent an invalid PodList: no items list")
        infos = self._pod_infos(items, source)
        if self._numa is not None:
            placed = self._numa.numa_nodes(infos)
            infos = [
                structs.replace(p, numa_nodes=placed[p.uid]) if placed.get(p.uid) else p
                for p in infos
            ]
        if self._usage is not None:
            usage = self._usage.sample(infos)
            self.pod_usage = Absent("no-kubepods-cgroup") if usage is None else usage
        return PodsSection(measured_at=measured_at, source=source, pods=infos)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ----------------------------------------------------------------- sources

    def _list_from_apiserver(self) -> Any:
        """The PodList as JSON: decoding it into client model objects costs more than the
        whole rest of a collection cycle, and the pod arithmetic works on JSON."""
        from kubernetes import client

        api = client.CoreV1Api(self._api_client("apiserver"))
        # Not preloaded, the call returns the raw HTTP response, whatever its annotation says.
        response = cast(
            "BaseHTTPResponse",
            api.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={self._node}",
                resource_version="0",
                _request_timeout=self._settings.timeout_s,
                _preload_content=False,
            ),
        )
        return json.loads(response.data)

    def _list_from_kubelet(self) -> Any:
        api = self._api_client("kubelet")
        headers = {"Accept": "application/json"}
        if self._settings.token_file:  # re-read each time: projected tokens rotate
            token = read_text(Path(self._settings.token_file)).strip()
            headers["Authorization"] = f"Bearer {token}"
        method, url, headers, _, _ = api.param_serialize(
            "GET", "/pods", header_params=headers, auth_settings=[]
        )
        response = api.call_api(
            method, url, header_params=headers, _request_timeout=self._settings.timeout_s
        )
        body = response.read()
        if not 200 <= response.status < 300:
            api.response_deserialize(response, {})  # raises ApiException with the status
        return json.loads(body)

    def _api_client(self, source: str) -> ApiClient:
        """The cached client, built on first use; a failed build is retried next cycle."""
        if self._client is None:
            try:
                self._client = _new_client(source, self._settings)
            except CollectorError:
                raise
            except Exception as e:  # the config loaders raise anything on a bad file
                # First line only: YAML errors go on to quote the file, token lines included.
                detail = (str(e).splitlines() or [""])[0]
                raise CollectorError(
                    f"pods: {source} client config: {type(e).__name__}: {detail}"
                ) from e
        return self._client

    # ------------------------------------------------------------- conversion

    def _pod_infos(self, pods: Iterable[Any], source: str) -> list[PodInfo]:
        """Running and pending pods as PodInfo.

        A pod with a malformed quantity or an out-of-range value is *skipped*, not
        reported with that resource as 0: a real API server rejects such a pod, so it
        comes from a broken source, and a made-up number would be reported as fact while
        the other pods stay truthful. Each bad pod is warned about once, not every cycle.
        """
        infos: list[PodInfo] = []
        bad: set[str] = set()
        for pod in pods:
            if not isinstance(pod, dict):
                raise CollectorError("pods: the PodList holds an item that is not an object")
            if (pod.get("status") or {}).get("phase") in _TERMINAL_PHASES:
                continue
            try:
                infos.append(codec.validate(_pod_info(pod, self._settings.label_keys, source)))
            except (QuantityError, SchemaError, TypeError, AttributeError) as e:
                meta = pod.get("metadata") or {}
                key = f"{meta.get('namespace')}/{meta.get('name')}"
                bad.add(key)
                if key not in self._bad_pods:
                    log.warning("pods: skipping pod %s: %s", key, e)
        self._bad_pods = frozenset(bad)
        return infos


def build(settings: AgentSettings, clock: Clock) -> PodsCollector:
    usage = PodUsageSampler(settings.paths.cgroup, clock)
    numa = PodNuma(settings.paths.cgroup, settings.paths.sys, clock)
    return PodsCollector(settings.pods, settings.node_name, clock, usage=usage, numa=numa)


# ------------------------------------------------------------------ client setup


def _new_client(source: str, settings: PodsSettings) -> ApiClient:
    """An ApiClient that never retries: a retry would multiply the timeout past the runner's."""
    from kubernetes import client, config

    cfg = client.Configuration()
    cfg.retries = False
    if source == "kubelet":
        if not settings.kubelet_url:
            raise CollectorError("pods: the kubelet source needs a kubelet URL")
        cfg.host = settings.kubelet_url.rstrip("/")
        if settings.kubelet_ca_file:
            cfg.ssl_ca_cert = settings.kubelet_ca_file
        else:
            cfg.verify_ssl = False
            _quiet_unverified_tls(cfg.host)
        return client.ApiClient(cfg)
    if settings.kubeconfig:
        built: ApiClient = config.new_client_from_config(
            config_file=settings.kubeconfig, client_configuration=cfg, persist_config=False
        )
        return built
    config.load_incluster_config(client_configuration=cfg)
    return client.ApiClient(cfg)


def _quiet_unverified_tls(url: str) -> None:
    """Kubelets serve self-signed certificates, and no CA file means the operator chose not
    to verify; urllib3 would warn on every request, so say it once and filter that host only.
    """
    import urllib3

    parts = urlparse(url)
    if parts.scheme != "https":
        return
    host = parts.hostname or ""
    warnings.filterwarnings(
        "ignore",
        message=f"Unverified HTTPS request is being made to host '{re.escape(host)}'",
        category=urllib3.exceptions.InsecureRequestWarning,
    )
    log.warning("pods: the kubelet's TLS certificate is not verified (no kubelet CA file)")


def _translate_errors(source: str, fetch: Callable[[], Any]) -> Any:
    """Run ``fetch``; turn client errors into NoData (unreachable) or CollectorError."""
    import pydantic
    import urllib3
    from kubernetes.client.exceptions import ApiException

    try:
        return fetch()
    except ApiException as e:
        status = e.status or 0
        if status in (401, 403):
            what = "authentication failed" if status == 401 else "forbidden (check RBAC)"
            raise CollectorError(
                f"pods: {source} refused the pod list: HTTP {status}, {what}"
            ) from e
        if status == 429 or status >= 500:
            raise base.NoData(f"pods-source-unreachable: HTTP {status}") from e
        reason = " ".join(str(e.reason or "").split()) or "no reason"
        code = f"HTTP {status}: " if status else ""  # 0: TLS failure, unexpected content type
        raise CollectorError(f"pods: {source}: {code}{reason}") from e
    except urllib3.exceptions.HTTPError as e:
        raise base.NoData(f"pods-source-unreachable: {_short_cause(e)}") from e
    except (json.JSONDecodeError, pydantic.ValidationError) as e:
        raise CollectorError(f"pods: {source} sent an invalid PodList: {e}") from e
    except ValueError as e:  # http.client quotes header values, the bearer token among them
        raise CollectorError(
            f"pods: {source} request failed: {type(e).__name__} (details withheld: they may "
            "hold the token; is there a newline in the token file?)"
        ) from e


def _short_cause(e: Exception) -> str:
    import urllib3

    exc = urllib3.exceptions
    if isinstance(e, exc.MaxRetryError) and e.reason is not None:
        e = e.reason
    if isinstance(e, exc.NewConnectionError):  # before TimeoutError: it subclasses it
        return str(getattr(e.__cause__, "strerror", None) or "connection failed").lower()
    if isinstance(e, exc.TimeoutError):
        return "timeout"
    if isinstance(e, exc.ProtocolError):
        return "connection aborted"
    return type(e).__name__


# --------------------------------------------------------------- pod arithmetic


def _pod_info(raw: Mapping[str, Any], label_keys: Iterable[str], source: str) -> PodInfo:
    """A pod in JSON form (what the API server or the kubelet sends) as the report's PodInfo."""
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    labels, annotations = (meta.get("labels") or {}), (meta.get("annotations") or {})
    picked = {
        k: v
        for k in label_keys
        if (v := labels.get(k, annotations.get(k))) is not None and len(v) <= _MAX_LABEL_VALUE
    }
    return PodInfo(
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        phase=status.get("phase") or "Unknown",
        qos_class=podspec.qos_class(raw),
        priority=spec.get("priority") or 0,
        priority_class=spec.get("priorityClassName") or None,
        requests=_resources(podspec.totals(podspec.requests(raw))),
        limits=_resources(podspec.totals(podspec.limits(raw))),
        labels=picked,
        static=_static(annotations, source),
    )


def _static(annotations: Mapping[str, Any], source: str) -> bool:
    """Whether the pod is a static pod or its mirror, by what only the kubelet decides.

    The mirror annotation counts from either source: the kubelet runs no API-server pod
    that carries it (it takes the pod for a mirror, and deletes it when no static pod
    matches), so an owner setting it on a pod of their own gets no running pod, not an
    exempt one. ``config.source`` counts only in the kubelet's own list, where the kubelet
    writes it on every pod (``api`` for the API server's); through the API server it is
    the owner's to write and is not read.
    """
    if MIRROR_ANNOTATION in annotations:
        return True
    return source == "kubelet" and annotations.get(SOURCE_ANNOTATION, "api") != "api"


def _resources(t: podspec.Totals) -> Resources:
    return Resources(
        cpu_m=t.cpu_m, mem_b=t.mem_b, gpu=t.gpu, hugepages_b=t.hugepages_b, extended=t.extended
    )
