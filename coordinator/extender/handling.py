"""HTTP plumbing shared by the scheduler endpoints.

* **Bodies are read here, capped per route**, not through ``request.read()``: the app's
  ``client_max_size`` (1 MiB by default) is sized for agent reports, while a filter call
  in Nodes mode carries every candidate Node object. Above the cap the answer is 413.
* **What cannot be understood is a 400** whose JSON body says what was wrong
  (``{"error": "NodeNames[1]: expected a string, got number"}``), answered before
  anything in the cluster changes: requests are decoded and checked whole first.
* **Every verb is timed** in ``stowage_request_duration_seconds{verb=…}``, 400s included.
* **No authentication**: kube-scheduler's and Volcano's extender clients send no
  credentials (only TLS, configured on their side); these endpoints change nothing but
  short-lived assumptions, and are meant to be reachable only from the schedulers.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from aiohttp import web

from coordinator import requestbody
from coordinator.config import CoordinatorSettings, ExtenderSettings
from coordinator.extender.gojson import WireError, error_body, parse_json, to_json
from coordinator.services import SERVICES, Services
from coordinator.state.kubeobjects import ObjectError, node_spec, pod_request
from coordinator.state.podrequest import PodRequest

log = logging.getLogger(__name__)

MIB = 2**20
MAX_NODES_PER_REQUEST: Final = ExtenderSettings().max_nodes_per_request
"""The default of ``extender.max_nodes_per_request``: the most nodes one scheduler call
may offer. kube-scheduler offers at most every node of the cluster, and Kubernetes is
tested to 5,000 nodes; the largest clusters run about 15,000 (65,000 at the very
largest, where the setting is raised)."""

Handler = Callable[[web.Request, Services], Awaitable[web.StreamResponse]]


def endpoint(verb: str) -> Callable[[Handler], Callable[[web.Request], Awaitable[Any]]]:
    """Wrap ``handler(request, services)``: time it under ``verb`` and answer a
    :class:`WireError` with its status (400 or 413) and ``{"error": message}``."""

    def wrap(handler: Handler) -> Callable[[web.Request], Awaitable[Any]]:
        @functools.wraps(handler)
        async def run(request: web.Request) -> web.StreamResponse:
            services = request.config_dict[SERVICES]
            with services.metrics.request_seconds.labels(verb).time():
                try:
                    return await handler(request, services)
                except WireError as e:
                    log.info("%s %s: %s", verb, e.status, e)
                    return json_reply(error_body(str(e)), status=e.status)

        return run

    return wrap


async def read_json(request: web.Request, limit_b: int) -> Any:
    """The request's JSON body, refusing (413) anything over ``limit_b`` bytes."""
    return parse_json(await read_body(request, limit_b))


async def read_body(request: web.Request, limit_b: int) -> bytes:
    """The request's body, refusing (413) anything over ``limit_b`` bytes."""
    try:
        return await requestbody.read(request, limit_b)
    except requestbody.BodyTooLargeError as e:
        raise WireError(str(e), status=413) from e


def request_of(pod: Mapping[str, Any], settings: CoordinatorSettings) -> PodRequest:
    """What the pod asks for, or a :class:`WireError` naming what is wrong with it."""
    try:
        return pod_request(pod, settings.signals.contiguity_threshold_b)
    except ObjectError as e:
        raise WireError(f"Pod: {e}") from e
    except (AttributeError, TypeError, ValueError) as e:  # a field of the wrong JSON type
        raise WireError(f"Pod: not a Kubernetes Pod ({e})") from e


def priority_of(pod: Mapping[str, Any]) -> int:
    """The pod's ``spec.priority`` (0 when absent or not a number): whether the room held
    for nominated pods (:mod:`coordinator.live.nominations`) counts for it. The caller's
    word, which can only change the answer given to that caller."""
    priority = (pod.get("spec") or {}).get("priority")
    return priority if isinstance(priority, int) and not isinstance(priority, bool) else 0


def check_count(listed: str, count: int, most: int) -> None:
    """Refuse (400) a list ``listed`` of more than ``most`` nodes
    (``extender.max_nodes_per_request``)."""
    if count > most:
        raise WireError(f"{listed}: {count} nodes, more than {most}")


def check_nodes(
    listed: str, nodes: Sequence[tuple[str, Mapping[str, Any] | None]], most: int
) -> None:
    """Refuse (400) a list ``listed`` of more than ``most`` nodes, or a Node object among
    ``(where, node)`` (None where only a name was sent) the cluster could not take, naming
    ``where``
    (``Nodes.items[3]: node n: status.allocatable.cpu: negative``).

    That is all a request's Node objects are used for. They are the caller's view — and
    the caller is not authenticated — so they never change the stored nodes, which come
    from the Node watch alone: a request could otherwise shrink or poison a node, or add
    any number of phantom ones. Their names are judged against the watch's nodes; a
    name it does not have passes filter and scores 0, like an unknown name in
    ``NodeNames`` mode (a node that just joined is in the watch within a second)."""
    check_count(listed, len(nodes), most)
    for where, node in nodes:
        if node is None:
            continue
        try:
            node_spec(node)
        except ObjectError as e:
            raise WireError(f"{where}: {e}") from e


def json_reply(body: Any, status: int = 200) -> web.Response:
    return json_bytes_reply(to_json(body), status)


def json_bytes_reply(body: bytes, status: int = 200) -> web.Response:
    """An answer whose JSON is already written."""
    return web.Response(body=body, status=status, content_type="application/json")
