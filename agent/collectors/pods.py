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

Outcomes: an unreachable source (refused, timed out, 5xx, 429) is ``NoData`` — the
section is absent, never empty; 401/403 is a ``CollectorError``, because missing RBAC or
a bad token is a real failure that someone must fix. Tokens are never logged.

The ``kubernetes`` package (about 10 MB of RSS) is imported only when a source is first
used, so an agent running with ``--pods-source=none`` never pays for it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlparse

from agent.collectors import base
from agent.settings import AgentSettings, PodsSettings
from common import codec, quantity
from common.clock import Clock
from common.errors import QuantityError, SchemaError
from common.schema import PodInfo, PodsSection, Resources

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, V1Pod, V1PodList, V1ResourceRequirements

NAME: Final = "pods"

log = logging.getLogger(__name__)

_TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
"""Finished pods hold no resources; the scheduler does not count them either."""
_QOS_RESOURCES: Final = frozenset({"cpu", "memory"})
_POD_LEVEL_RESOURCES: Final = frozenset({"cpu", "memory"})
_GPU: Final = "nvidia.com/gpu"
_HUGEPAGES: Final = "hugepages-"
_NOT_EXTENDED: Final = frozenset({"cpu", "memory", "ephemeral-storage", _GPU})
_MAX_LABEL_VALUE: Final = 4096
"""The schema's ``Text`` cap. A longer annotation value is dropped, not the whole pod."""

Amounts = dict[str, Fraction]
"""Resource name -> exact quantity, like Go's ``v1.ResourceList``."""


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
    ) -> None:
        self._settings = settings
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
        return PodsSection(
            measured_at=measured_at, source=source, pods=self._pod_infos(pod_list.items or [])
        )

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ----------------------------------------------------------------- sources

    def _list_from_apiserver(self) -> V1PodList:
        from kubernetes import client

        api = client.CoreV1Api(self._api_client("apiserver"))
        return api.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={self._node}",
            resource_version="0",
            _request_timeout=self._settings.timeout_s,
        )

    def _list_from_kubelet(self) -> V1PodList:
        api = self._api_client("kubelet")
        headers = {"Accept": "application/json"}
        if self._settings.token_file:  # re-read each time: projected tokens rotate
            token = base.read_text(Path(self._settings.token_file)).strip()
            headers["Authorization"] = f"Bearer {token}"
        method, url, headers, _, _ = api.param_serialize(
            "GET", "/pods", header_params=headers, auth_settings=[]
        )
        response = api.call_api(
            method, url, header_params=headers, _request_timeout=self._settings.timeout_s
        )
        response.read()
        pod_list: V1PodList = api.response_deserialize(response, {"200": "V1PodList"}).data
        return pod_list

    def _api_client(self, source: str) -> ApiClient:
        """The cached client, built on first use; a failed build is retried next cycle."""
        if self._client is None:
            try:
                self._client = _new_client(source, self._settings)
            except base.CollectorError:
                raise
            except Exception as e:  # the config loaders raise anything on a bad file
                # First line only: YAML errors go on to quote the file, token lines included.
                detail = (str(e).splitlines() or [""])[0]
                raise base.CollectorError(
                    f"pods: {source} client config: {type(e).__name__}: {detail}"
                ) from e
        return self._client

    # ------------------------------------------------------------- conversion

    def _pod_infos(self, pods: Iterable[V1Pod]) -> list[PodInfo]:
        """Running and pending pods as PodInfo.

        A pod with a malformed quantity or an out-of-range value is *skipped*, not
        reported with that resource as 0: a real API server rejects such a pod, so it
        comes from a broken source, and a made-up number would be reported as fact while
        the other pods stay truthful. Each bad pod is warned about once, not every cycle.
        """
        infos: list[PodInfo] = []
        bad: set[str] = set()
        for pod in pods:
            if pod.status is not None and pod.status.phase in _TERMINAL_PHASES:
                continue
            try:
                infos.append(codec.validate(_pod_info(pod, self._settings.label_keys)))
            except (QuantityError, SchemaError) as e:
                key = f"{pod.metadata.namespace}/{pod.metadata.name}"
                bad.add(key)
                if key not in self._bad_pods:
                    log.warning("pods: skipping pod %s: %s", key, e)
        self._bad_pods = frozenset(bad)
        return infos


def build(settings: AgentSettings, clock: Clock) -> PodsCollector:
    return PodsCollector(settings.pods, settings.node_name, clock)


# ------------------------------------------------------------------ client setup


def _new_client(source: str, settings: PodsSettings) -> ApiClient:
    """An ApiClient that never retries: a retry would multiply the timeout past the runner's."""
    from kubernetes import client, config

    cfg = client.Configuration()
    cfg.retries = False
    if source == "kubelet":
        if not settings.kubelet_url:
            raise base.CollectorError("pods: the kubelet source needs a kubelet URL")
        cfg.host = settings.kubelet_url.rstrip("/")
        if settings.kubelet_ca_file:
            cfg.ssl_ca_cert = settings.kubelet_ca_file
        else:
            cfg.verify_ssl = False
            _quiet_unverified_tls(cfg.host)
        return client.ApiClient(cfg)
    if settings.kubeconfig:
        return config.new_client_from_config(
            config_file=settings.kubeconfig, client_configuration=cfg, persist_config=False
        )
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


def _translate_errors(source: str, fetch: Callable[[], V1PodList]) -> V1PodList:
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
            raise base.CollectorError(
                f"pods: {source} refused the pod list: HTTP {status}, {what}"
            ) from e
        if status == 429 or status >= 500:
            raise base.NoData(f"pods-source-unreachable: HTTP {status}") from e
        reason = " ".join(str(e.reason or "").split()) or "no reason"
        code = f"HTTP {status}: " if status else ""  # 0: TLS failure, unexpected content type
        raise base.CollectorError(f"pods: {source}: {code}{reason}") from e
    except urllib3.exceptions.HTTPError as e:
        raise base.NoData(f"pods-source-unreachable: {_short_cause(e)}") from e
    except (json.JSONDecodeError, pydantic.ValidationError) as e:
        raise base.CollectorError(f"pods: {source} sent an invalid PodList: {e}") from e
    except ValueError as e:  # http.client quotes header values, the bearer token among them
        raise base.CollectorError(
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


def _pod_info(pod: V1Pod, label_keys: Iterable[str]) -> PodInfo:
    meta, spec, status = pod.metadata, pod.spec, pod.status
    labels, annotations = (meta.labels or {}), (meta.annotations or {})
    picked = {
        k: v
        for k in label_keys
        if (v := labels.get(k, annotations.get(k))) is not None and len(v) <= _MAX_LABEL_VALUE
    }
    return PodInfo(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        phase=(status.phase if status else None) or "Unknown",
        qos_class=(status.qos_class if status else None) or qos_class(pod),
        priority=spec.priority or 0,
        priority_class=spec.priority_class_name or None,
        requests=_resources(pod_requests(pod)),
        limits=_resources(pod_limits(pod)),
        labels=picked,
    )


def _amounts(raw: Mapping[str, str] | None) -> Amounts:
    out: Amounts = {}
    for name, text in (raw or {}).items():
        value = quantity.parse_value(text)
        if value < 0:
            raise QuantityError(f"{name}: negative quantity {text!r}")
        out[name] = value
    return out


def _requests_of(rr: V1ResourceRequirements | None) -> Amounts:
    """Requests, with API defaulting applied: a limit without a request is also the request."""
    return _amounts({**(rr.limits or {}), **(rr.requests or {})}) if rr else {}


def _limits_of(rr: V1ResourceRequirements | None) -> Amounts:
    return _amounts(rr.limits) if rr else {}


def _add(into: Amounts, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Fraction(0)) + value


def _max(into: Amounts, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        into[name] = max(into.get(name, value), value)


def _aggregate(pod: V1Pod, pick: Callable[[V1ResourceRequirements | None], Amounts]) -> Amounts:
    """``AggregateContainerRequests``: what the pod needs at its peak, container by container.

    Regular containers run together, so they add up. Init containers run one at a time,
    each alongside the sidecars (``restartPolicy: Always``) started before it; sidecars
    keep running, so they also add to the total. The peak is the larger of the two phases.
    """
    spec = pod.spec
    total: Amounts = {}
    for c in spec.containers or []:
        _add(total, pick(c.resources))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for c in spec.init_containers or []:
        own = pick(c.resources)
        if c.restart_policy == "Always":
            _add(total, own)
            _add(sidecars, own)
            during = sidecars
        else:
            during = dict(own)
            _add(during, sidecars)
        _max(init_peak, during)
    _max(total, init_peak)
    return total


def pod_requests(pod: V1Pod) -> Amounts:
    """``PodRequests``: containers, then pod-level cpu/memory if set, plus overhead."""
    requests = _aggregate(pod, _requests_of)
    pod_level = _requests_of(pod.spec.resources)
    requests.update({k: v for k, v in pod_level.items() if k in _POD_LEVEL_RESOURCES})
    _add(requests, _amounts(pod.spec.overhead))
    return requests


def pod_limits(pod: V1Pod) -> Amounts:
    """``PodLimits``: like requests, but overhead only raises limits that exist (0 = none)."""
    limits = _aggregate(pod, _limits_of)
    pod_level = _limits_of(pod.spec.resources)
    limits.update({k: v for k, v in pod_level.items() if k in _POD_LEVEL_RESOURCES})
    for name, value in _amounts(pod.spec.overhead).items():
        if name in limits:
            limits[name] += value
    return limits


def qos_class(pod: V1Pod) -> str:
    """``ComputePodQOS``, for sources that leave ``status.qosClass`` empty.

    Guaranteed: every container limits cpu and memory and the summed requests equal the
    summed limits; BestEffort: no cpu/memory request or limit anywhere; else Burstable.
    Pod-level resources, when set, replace the containers.
    """
    spec = pod.spec
    if spec.resources is not None and (spec.resources.requests or spec.resources.limits):
        groups = [spec.resources]
    else:
        groups = [c.resources for c in [*(spec.containers or []), *(spec.init_containers or [])]]
    requests: Amounts = {}
    limits: Amounts = {}
    guaranteed = True
    for rr in groups:
        _add(requests, {k: v for k, v in _requests_of(rr).items() if k in _QOS_RESOURCES and v})
        own_limits = {k: v for k, v in _limits_of(rr).items() if k in _QOS_RESOURCES and v}
        _add(limits, own_limits)
        guaranteed = guaranteed and own_limits.keys() == _QOS_RESOURCES
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed and requests == limits else "Burstable"


def _resources(amounts: Amounts) -> Resources:
    """Round once, up, like ``MilliValue()`` for cpu and ``Value()`` for the rest."""
    hugepages = sum((v for k, v in amounts.items() if k.startswith(_HUGEPAGES)), Fraction(0))
    extended = {
        k: math.ceil(v)
        for k, v in amounts.items()
        if k not in _NOT_EXTENDED and not k.startswith(_HUGEPAGES)
    }
    return Resources(
        cpu_m=math.ceil(amounts.get("cpu", 0) * 1000),
        mem_b=math.ceil(amounts.get("memory", 0)),
        gpu=math.ceil(amounts.get(_GPU, 0)),
        hugepages_b=math.ceil(hugepages),
        extended=extended,
    )
