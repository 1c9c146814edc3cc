"""Routing of ``/api/v1/...`` and ``/apis/<group>/<version>/...`` and the generic verbs.

The path is resolved the way the apiserver's ``RequestInfoFactory`` does it (namespace,
resource, name, subresource), then one function per verb does what the generic registry
store does for every type: list with selectors and pagination, get, create, update (PUT)
and patch with resourceVersion preconditions, delete with preconditions. Type-specific
rules come from the ``Resource`` entry (status only through ``/status``, pods reset to
Pending on create); eviction, token reviews and watches live in their own modules.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from hack.kubeapi import (
    binding,
    errors,
    eviction,
    fields,
    objects,
    patch,
    protobuf,
    selectors,
    table,
    tokens,
    validation,
    watch,
)
from hack.kubeapi.cluster import CLUSTER, Cluster
from hack.kubeapi.resources import (
    BINDINGS,
    NAMESPACES,
    PODS,
    RESOURCES,
    SUBRESOURCE_KINDS,
    Resource,
    lookup,
)
from hack.kubeapi.store import Obj

log = logging.getLogger(__name__)
NS_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)


def not_served() -> errors.ApiError:
    """A path that names no served resource (the apiserver's generic 404)."""
    return errors.ApiError(
        errors.status(404, "NotFound", "the server could not find the requested resource")
    )


_SERVER_FIELDS = ("deletionTimestamp", "deletionGracePeriodSeconds")


@dataclass(frozen=True, slots=True)
class Target:
    res: Resource
    namespace: str | None  # None: cluster-scoped, or a namespaced type across all namespaces
    name: str | None
    sub: str | None


def resolve(group: str, version: str, tail: str) -> Target:
    parts = tail.split("/")
    if len(parts) >= 3 and parts[0] == "namespaces":
        res = lookup(group, version, parts[2])
        if res is not None and res.namespaced:
            rest = parts[3:]
            if len(rest) > 2:
                raise not_served()
            return _target(res, parts[1], rest)
    res = lookup(group, version, parts[0])
    if res is None or len(parts) > 3 or (res.namespaced and len(parts) > 1):
        raise not_served()
    return _target(res, None, parts[1:])


def _target(res: Resource, namespace: str | None, rest: list[str]) -> Target:
    name = rest[0] if rest else None
    sub = rest[1] if len(rest) > 1 else None
    if sub is not None and sub not in res.subresources:
        raise not_served()
    return Target(res, namespace, name, sub)


async def dispatch(request: web.Request) -> web.StreamResponse:
    cluster = request.app[CLUSTER]
    try:
        group = request.match_info.get("group", "")
        version = request.match_info["version"]
        target = resolve(group, version, request.match_info["tail"])
        verb = _verb(request, target)
        if verb == "watch":
            return await watch.stream(request, cluster, target.res, target.namespace)
        if verb == "list":
            return _respond(request, 200, list_objects(cluster, target, request.query))
        if verb == "get":
            return _respond(
                request, 200, cluster.store.get(target.res, target.namespace or "", target.name)
            )
        body = await _json_body(request)
        warnings: list[str] = []
        code, obj = _write(cluster, target, verb, request, body, warnings)
        return _respond(request, code, obj, warnings)
    except errors.ApiError as e:
        return web.json_response(e.status, status=e.code, headers=e.headers)
    except Exception as e:  # a bug here: still answer as the apiserver would, and log it
        log.exception("kubeapi: %s %s failed", request.method, request.path)
        error = errors.ApiError(
            errors.status(500, "InternalError", f"Internal error occurred: {e}")
        )
        return web.json_response(error.status, status=500)


def _verb(request: web.Request, target: Target) -> str:
    method, res = request.method, target.res
    if target.sub in SUBRESOURCE_KINDS:
        verb = "create" if method == "POST" else ""
    elif target.name is None:
        watching = request.query.get("watch") in ("true", "1")
        verb = {"GET": "watch" if watching else "list", "POST": "create"}.get(method, "")
        if verb == "create" and target.namespace is None and res.namespaced:
            verb = ""
    else:
        verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
        if target.sub and verb == "delete":
            verb = ""
    if verb not in res.verbs:
        raise errors.method_not_allowed(
            "the server does not allow this method on the requested resource"
        )
    return verb


BODY_TYPES = ("application/json", "application/yaml", protobuf.MEDIA_TYPE)
"""What a create, update or delete body may be (protobuf only for the kinds kubectl's
typed clients create, :mod:`hack.kubeapi.protobuf`); CBOR and the rest get 415."""


async def _json_body(request: web.Request) -> Any:
    raw = await request.read()
    media = request.headers.get("Content-Type", "").split(";")[0].strip()
    if request.method != "PATCH" and media and media not in BODY_TYPES:
        raise errors.unsupported_media_type(BODY_TYPES)
    if not raw:
        return None
    try:
        if media == protobuf.MEDIA_TYPE:
            return protobuf.decode(raw)
        if media == "application/yaml":
            return yaml.safe_load(raw)
        return fields.loads(raw)
    except (ValueError, yaml.YAMLError) as e:
        raise errors.bad_request(f"the body of the request could not be decoded: {e}") from e


def _write(
    cluster: Cluster,
    target: Target,
    verb: str,
    request: web.Request,
    body: Any,
    warnings: list[str],
) -> tuple[int, Obj]:
    """Do a write; ``warnings`` collects the fields the body's decoding dropped."""
    res, query = target.res, request.query
    if target.sub == "eviction":
        return 201, eviction.evict(
            cluster.store, target.namespace or "", target.name or "", body, query
        )
    how = fields.directive(query, verb)
    dry = dry_run(query, verb, body if verb == "delete" else None)
    if target.sub == "binding" or res is BINDINGS:
        obj = _object(body, BINDINGS)
        warnings += fields.decode(BINDINGS, obj, how)
        _same_namespace(obj, target.namespace)
        return 201, binding.bind(cluster, target.namespace or "", target.name, obj, dry_run=dry)
    if res.plural == "tokenreviews":
        return 201, tokens.review(cluster.tokens, _object(body, res))
    if verb in ("create", "update"):
        obj = _object(body, res)
        warnings += fields.decode(res, obj, how)
        if verb == "create":
            return 201, create(cluster, res, target.namespace, obj, dry_run=dry)
        return update(cluster, target, obj, dry_run=dry)
    if verb == "patch":
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        return 200, patch_object(cluster, target, content_type, body, how, warnings, dry)
    return 200, delete(cluster, target, body or {}, query, dry_run=dry)


def dry_run(query: Any, verb: str, options: Any) -> bool:
    """``dryRun=All`` in the query (or a DeleteOptions body): validate and answer, store
    nothing. Any other value is refused, as the apiserver's options validation does."""
    values = list(query.getall("dryRun", []))
    if isinstance(options, dict):
        values += list(options.get("dryRun") or [])
    for value in values:
        if value != "All":
            raise errors.unsupported_option(verb, "dryRun", value, ("All",))
    return bool(values)


def _object(body: Any, res: Resource) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request is not a JSON object")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if (kind and kind != res.kind) or (api_version and api_version != res.api_version):
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({res.api_version})"
            if kind == res.kind
            else f'{kind} in version "{res.version}" cannot be handled as a {res.kind}'
        )
    body.setdefault("metadata", {})
    return body


# -------------------------------------------------------------------- reads


def list_objects(cluster: Cluster, target: Target, query: Mapping[str, str]) -> Obj:
    res = target.res
    labels = selectors.parse_labels(query.get("labelSelector", ""))
    fields = selectors.parse_fields(query.get("fieldSelector", ""), res.selectable())
    items, rv = cluster.store.list(res, target.namespace)
    if query.get("resourceVersionMatch") == "Exact" and query.get("resourceVersion") != str(rv):
        raise errors.expired(f"too old resource version: {query.get('resourceVersion')} ({rv})")
    items = [o for o in items if labels(o) and fields(o)]
    meta: Obj = {"resourceVersion": str(rv)}
    if query.get("continue"):
        start = _decode_continue(query["continue"])
        items = [o for o in items if _sort_key(o) > start]
    limit = errors.int_query(query, "limit")
    if 0 < limit < len(items):
        meta["continue"] = _encode_continue(_sort_key(items[limit - 1]), rv)
        meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    for item in items:  # list items carry no TypeMeta in the apiserver's JSON
        item.pop("apiVersion", None)
        item.pop("kind", None)
    return {
        "kind": f"{res.kind}List",
        "apiVersion": res.api_version,
        "metadata": meta,
        "items": items,
    }


def _sort_key(obj: Obj) -> list[str]:
    return [obj["metadata"].get("namespace", ""), obj["metadata"]["name"]]


def _encode_continue(key: list[str], rv: int) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": key}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> list[str]:
    try:
        return list(json.loads(base64.urlsafe_b64decode(token.encode()))["start"])
    except (ValueError, KeyError, TypeError) as e:
        raise errors.bad_request(f"continue key is not valid: {e}") from e


def _respond(
    request: web.Request, code: int, obj: Obj, warnings: list[str] | None = None
) -> web.Response:
    as_table = table.negotiate(request.headers.get("Accept", ""))
    if as_table and obj.get("kind") != "Status":
        include = request.query.get("includeObject", "Metadata")
        obj = table.convert(obj, include, as_table, request.app[CLUSTER].clock.wall())
    response = web.json_response(obj, status=code)
    for warning in warnings or ():  # RFC 7234 warn-code 299, agent "-", as the apiserver
        response.headers.add("Warning", f"299 - {json.dumps(warning)}")
    return response


# ------------------------------------------------------------------- writes


def create(
    cluster: Cluster, res: Resource, namespace: str | None, obj: Obj, *, dry_run: bool = False
) -> Obj:
    md = obj["metadata"]
    if res.namespaced:
        _same_namespace(obj, namespace)
        md["namespace"] = namespace
        if cluster.store.find(NAMESPACES, "", namespace or "") is None:
            raise errors.not_found("namespaces", namespace or "")
    if md.get("resourceVersion"):
        raise errors.internal("resourceVersion should not be set on objects to be created")
    if not md.get("name") and md.get("generateName"):
        md["name"] = md["generateName"] + objects.new_uid().replace("-", "")[:5]
    for field in _SERVER_FIELDS:
        md.pop(field, None)
    if not md.get("name"):
        raise errors.invalid(
            res.kind,
            "",
            [
                {
                    "reason": "FieldValueRequired",
                    "field": "metadata.name",
                    "message": "Required value: name or generateName is required",
                }
            ],
            res.group,
        )
    if res is PODS:
        objects.default_pod(obj)
        obj["status"] = {"phase": "Pending", "qosClass": objects.qos_class(obj["spec"])}
    elif res is NAMESPACES:  # the strategy sets the finalizer and the phase
        obj = {**objects.namespace(md["name"]), **obj, "status": {"phase": "Active"}}
        obj["spec"] = {**(obj.get("spec") or {}), "finalizers": ["kubernetes"]}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = md["name"]
    validation.validate(res, obj)
    return cluster.store.create(res, obj, dry_run=dry_run)


def _same_namespace(obj: Obj, namespace: str | None) -> None:
    """``EnsureObjectNamespaceMatchesRequestNamespace``: an object's namespace, when set,
    is the request's."""
    given = obj["metadata"].get("namespace")
    if given and given != namespace:
        raise errors.bad_request(NS_MISMATCH)


def _merge_write(res: Resource, sub: str | None, old: Obj, new: Obj) -> Obj:
    """What a write may change: ``/status`` writes only status; the main endpoint of a type
    with a status subresource keeps the stored status; deletion fields are the server's."""
    if sub == "status":
        merged = copy.deepcopy(old)
        merged["status"] = new.get("status", {})
        merged["metadata"]["resourceVersion"] = new.get("metadata", {}).get("resourceVersion")
        return merged
    if res.has_status:
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    for field in _SERVER_FIELDS:
        if field in old["metadata"]:
            new.setdefault("metadata", {})[field] = old["metadata"][field]
        else:
            new.get("metadata", {}).pop(field, None)
    return new


def update(cluster: Cluster, target: Target, obj: Obj, *, dry_run: bool = False) -> tuple[int, Obj]:
    res, ns, name = target.res, target.namespace or "", target.name or ""
    md = obj["metadata"]
    if md.get("name", name) != name:
        raise errors.bad_request(
            f"the name of the object ({md.get('name')}) does not match the name on the URL ({name})"
        )
    if res.namespaced and md.get("namespace", ns) != ns:
        raise errors.bad_request(NS_MISMATCH)
    md["name"] = name
    if cluster.store.find(res, ns, name) is None and res.create_on_update and not target.sub:
        md.pop("resourceVersion", None)
        return 201, create(cluster, res, target.namespace, obj, dry_run=dry_run)

    def change(old: Obj) -> Obj:
        new = _merge_write(res, target.sub, old, obj)
        validation.validate(res, new)
        return new

    return 200, cluster.store.update(res, ns, name, change, dry_run=dry_run)


PATCHERS = {
    "application/merge-patch+json": patch.merge_patch,
    "application/strategic-merge-patch+json": patch.strategic_merge_patch,
    "application/json-patch+json": patch.json_patch,
}


def patch_object(
    cluster: Cluster,
    target: Target,
    content_type: str,
    body: Any,
    how: str,
    warnings: list[str],
    dry_run: bool = False,
) -> Obj:
    """Apply a patch; the result is decoded as a body would be (``fields.decode``)."""
    patcher = PATCHERS.get(content_type)
    if patcher is None:
        raise errors.unsupported_media_type()
    if body is None:
        raise errors.bad_request("the body of the request was empty")
    if content_type != "application/json-patch+json" and not isinstance(body, dict):
        raise errors.bad_request("the body of the request is not a JSON object")
    res, ns, name = target.res, target.namespace or "", target.name or ""

    def change(old: Obj) -> Obj:
        patched = patcher(old, body)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        warnings.extend(fields.decode(res, patched, how, patched=True))
        md = patched.setdefault("metadata", {})
        if md.get("name") != name or (res.namespaced and md.get("namespace") != ns):
            raise errors.bad_request(
                "metadata.name and metadata.namespace cannot be changed by a patch"
            )
        if md.get("resourceVersion") == old["metadata"]["resourceVersion"]:
            md.pop("resourceVersion")  # not a precondition unless the patch set it
        new = _merge_write(res, target.sub, old, patched)
        validation.validate(res, new)
        return new

    return cluster.store.update(res, ns, name, change, dry_run=dry_run)


def delete(
    cluster: Cluster,
    target: Target,
    options: Obj,
    query: Mapping[str, str],
    *,
    dry_run: bool = False,
) -> Obj:
    res, ns, name = target.res, target.namespace or "", target.name or ""
    pre = options.get("preconditions") or {}
    if res is PODS and not dry_run:
        grace = options.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        return eviction.delete_pod(
            cluster.store, ns, name, pre, None if grace is None else int(grace)
        )
    last = None
    if res is NAMESPACES and not dry_run:  # at once, where the controller takes a while
        for other in RESOURCES:
            if other.namespaced and other.stored:
                for obj in cluster.store.list(other, name)[0]:
                    cluster.store.delete(other, name, obj["metadata"]["name"])

        def last(obj: Obj) -> None:
            obj["metadata"]["deletionTimestamp"] = objects.now()
            obj["status"] = {"phase": "Terminating"}

    deleted = cluster.store.delete(
        res,
        ns,
        name,
        uid=pre.get("uid"),
        resource_version=pre.get("resourceVersion"),
        last=last,
        dry_run=dry_run,
    )
    if res.return_deleted:
        return deleted
    resource, _, group = res.group_resource.partition(".")
    details = {"name": name, "group": group, "kind": resource, "uid": deleted["metadata"]["uid"]}
    return errors.status(0, "", "", {k: v for k, v in details.items() if v}, success=True)
