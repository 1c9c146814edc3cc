"""``/openapi/v3`` (and ``/openapi/v2`` as JSON): the schema of every served kind.

kubectl needs these to ``apply`` with validation on (its default): it reads the PATCH
operation of the object's kind in the OpenAPI v3 document of its group-version, and when
that operation takes the ``fieldValidation`` query parameter it leaves validation to the
server (``fieldValidation=Strict``, :mod:`hack.kubeapi.fields`) instead of validating
client side against the v2 document, which it only takes as protobuf. It also computes
``apply``'s strategic merge patch from the v3 schemas (the ``x-kubernetes-patch-*``
extensions) and ``kubectl explain`` reads them.

The documents are generated once, on first use, from the ``kubernetes`` client's models
(:mod:`hack.kubeapi.models`) and the served resources (:mod:`hack.kubeapi.resources`):
schema names as the apiserver's (``io.k8s.api.core.v1.Pod``), the
``x-kubernetes-group-version-kind`` extension on each kind and on each operation, one path
per verb the emulator serves. The v3 discovery document lists one document per
group-version with a content hash, as the apiserver does, so clients cache by it.

``/openapi/v2`` is served as JSON only: a request that accepts only protobuf (kubectl's)
gets 406, which client-go takes as "not available" (kubectl then relies on v3).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from hack.kubeapi import discovery, models, patch
from hack.kubeapi.resources import RESOURCES, SUBRESOURCE_KINDS, Resource, group_versions

Schema = dict[str, Any]
V3_REF = "#/components/schemas/"
META = frozenset(
    {
        "ObjectMeta", "ListMeta", "OwnerReference", "ManagedFieldsEntry", "LabelSelector",
        "LabelSelectorRequirement", "Condition", "DeleteOptions", "Preconditions", "Status",
        "StatusDetails", "StatusCause",
    }
)  # fmt: skip
"""Go types of ``k8s.io/apimachinery/pkg/apis/meta/v1``; every other model is named after
the group of the kind that first reaches it."""
PRIMITIVES: dict[str, Schema] = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int64"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "bytes": {"type": "string", "format": "byte"},  # ConfigMap binaryData, base64
    "object": {"x-kubernetes-preserve-unknown-fields": True},  # int-or-string, raw objects
}
PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
PATCH_SCHEMA: Schema = {
    "description": "Patch is provided to give a concrete name and type to the Kubernetes "
    "PATCH request body.",
    "type": "object",
}
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


def _package(group: str) -> str:
    """The Go package a group's types live in: core, coordination, policy..."""
    return group.split(".")[0] if group else "core"


class Schemas:
    """Schemas of models by their apiserver name, built on demand with their references."""

    def __init__(self) -> None:
        self.schemas: dict[str, Schema] = {PATCH: PATCH_SCHEMA}  # the one type without a model
        self.names: dict[str, str] = {}  # model class -> schema name
        self.refs: dict[str, set[str]] = {PATCH: set()}  # schema name -> the names it refers to

    def name(self, model: str, version: str, package: str) -> str:
        """The schema of ``model`` (built on first use), by its name."""
        if model in self.names:
            return self.names[model]
        short = models.short_name(model)
        if short in META or (short.endswith("List") and short[:-4] in META):
            package, version = "apimachinery.pkg.apis.meta", "v1"
        else:
            package = f"api.{package}"
        name = f"io.k8s.{package}.{version}.{short}"
        self.names[model] = name
        self.refs[name] = set()
        self.schemas[name] = self._object(model, name, version, package.rpartition(".")[2])
        return name

    def _object(self, model: str, name: str, version: str, package: str) -> Schema:
        properties: dict[str, Schema] = {}
        required = []
        for field in models.fields(model).values():
            schema = self._type(field.type, name, version, package)
            if "$ref" in schema:  # siblings of $ref are ignored in v3: wrap as the apiserver
                schema = {"allOf": [schema]}
            text = field.description or (
                models.description(field.type.name) if field.type.kind == "model" else ""
            )  # a model-typed field often has no description of its own: its type's
            if text:
                schema["description"] = text
            key = patch.MERGE_KEYS.get(field.json_name)
            if key and field.type.kind == "list":
                schema["x-kubernetes-patch-merge-key"] = key
                schema["x-kubernetes-patch-strategy"] = "merge"
            elif field.json_name in patch.MERGE_SETS and field.type.kind == "list":
                schema["x-kubernetes-patch-strategy"] = "merge"
            properties[field.json_name] = schema
            if field.required:
                required.append(field.json_name)
        out: Schema = {
            "description": models.description(model),
            "type": "object",
            "properties": properties,
        }
        if required:
            out["required"] = required
        return out

    def _type(self, type_: models.Type, owner: str, version: str, package: str) -> Schema:
        if type_.kind == "primitive":
            return dict(PRIMITIVES[type_.name])
        if type_.kind == "model":
            target = self.name(type_.name, version, package)
            self.refs[owner].add(target)
            return {"$ref": V3_REF + target}
        assert type_.item is not None
        item = self._type(type_.item, owner, version, package)
        if type_.kind == "list":
            return {"type": "array", "items": item}
        return {"type": "object", "additionalProperties": item}

    def closure(self, roots: set[str]) -> dict[str, Schema]:
        """The schemas ``roots`` need, sorted by name."""
        todo, seen = list(roots), set()
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(self.refs[name])
        return {name: self.schemas[name] for name in sorted(seen)}


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


def _query(name: str, type_: str, description: str) -> Schema:
    return {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": type_, "uniqueItems": True},
    }


WRITE_PARAMS = [
    _query("dryRun", "string", "When present, indicates that modifications should not be "
           "persisted. Valid values are: - All: all dry run stages will be processed"),
    _query("fieldManager", "string", "fieldManager is a name associated with the actor or "
           "entity that is making these changes."),
    _query("fieldValidation", "string", "fieldValidation instructs the server on how to "
           "handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate "
           "fields. Valid values are: Ignore, Warn (the default) and Strict."),
]  # fmt: skip
LIST_PARAMS = [
    _query("labelSelector", "string", "A selector to restrict the list of returned objects "
           "by their labels. Defaults to everything."),
    _query("fieldSelector", "string", "A selector to restrict the list of returned objects "
           "by their fields. Defaults to everything."),
    _query("limit", "integer", "limit is a maximum number of responses to return for a list "
           "call."),
    _query("continue", "string", "The continue option should be set when retrieving more "
           "results from the server."),
    _query("resourceVersion", "string", "resourceVersion sets a constraint on what resource "
           "versions a request may be served from."),
    _query("resourceVersionMatch", "string", "resourceVersionMatch determines how "
           "resourceVersion is applied to list calls."),
    _query("timeoutSeconds", "integer", "Timeout for the list/watch call."),
    _query("watch", "boolean", "Watch for changes to the described resources and return "
           "them as a stream of add, update, and remove notifications."),
    _query("allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events "
           "with type BOOKMARK."),
    _query("sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together "
           "with `watch=true`: the stream begins with synthetic ADDED events of all objects."),
]  # fmt: skip
DELETE_PARAMS = [
    _query("gracePeriodSeconds", "integer", "The duration in seconds before the object "
           "should be deleted."),
    _query("dryRun", "string", "When present, indicates that modifications should not be "
           "persisted."),
]  # fmt: skip


def _path_param(name: str, description: str) -> Schema:
    return {
        "name": name,
        "in": "path",
        "description": description,
        "required": True,
        "schema": {"type": "string", "uniqueItems": True},
    }


NAMESPACE_PARAM = _path_param("namespace", "object name and auth scope, such as for teams")
PRETTY_PARAM = _query("pretty", "string", "If 'true', then the output is pretty printed.")


@dataclass(frozen=True, slots=True)
class _Op:
    verb: str  # the operationId's verb: list, create, read, replace, patch, delete
    action: str  # x-kubernetes-action
    kind: tuple[str, str, str]  # the body's and answer's group, version, kind
    model: str
    suffix: str = ""  # operationId suffix: Status, Binding, Eviction, ForAllNamespaces


def _operation(
    schemas: Schemas, res: Resource, op: _Op, tag: str, ref: str, roots: set[str]
) -> Schema:
    group, version, kind = op.kind
    scope = "Namespaced" if res.namespaced and op.suffix != "ForAllNamespaces" else ""
    prefix = _package(res.group).capitalize() + res.version.capitalize()  # CoreV1, PolicyV1
    out: Schema = {
        "tags": [tag],
        "description": f"{op.action} {kind}",
        "operationId": f"{op.verb}{prefix}{scope}{res.kind}{op.suffix}",
        "responses": {},
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": _gvk(group, version, kind),
    }
    params: list[Schema] = []
    if op.verb == "list":
        params = list(LIST_PARAMS)
    elif op.verb in ("create", "replace", "patch"):
        params = list(WRITE_PARAMS)
    elif op.verb == "delete":
        params = list(DELETE_PARAMS)
    if params:
        out["parameters"] = params
    own = {"schema": {"$ref": V3_REF + ref}}
    if op.verb in ("create", "replace"):
        out["requestBody"] = {"content": {"*/*": own}, "required": True}
    elif op.verb == "patch":
        patch_body = {"schema": {"$ref": V3_REF + PATCH}}
        out["requestBody"] = {"content": dict.fromkeys(PATCH_TYPES, patch_body), "required": True}
    elif op.verb == "delete":
        options = schemas.name("V1DeleteOptions", "v1", "core")
        roots.add(options)
        out["requestBody"] = {"content": {"*/*": {"schema": {"$ref": V3_REF + options}}}}
    codes = {"create": ("200", "201", "202")}.get(op.verb, ("200",))
    for code in codes:
        out["responses"][code] = {
            "description": {"201": "Created", "202": "Accepted"}.get(code, "OK"),
            "content": {"application/json": own},
        }
    out["responses"]["401"] = {"description": "Unauthorized"}
    return out


def _operations(res: Resource) -> dict[str, dict[str, _Op]]:
    """``{path suffix: {method: operation}}`` for what the emulator serves of ``res``."""
    model = models.model_of(res) or ""
    kind = (res.group, res.version, res.kind)
    lists = (res.group, res.version, f"{res.kind}List")
    list_model = models.model_for(res.group, res.version, f"{res.kind}List") or ""
    coll: dict[str, _Op] = {}
    item: dict[str, _Op] = {}
    if "list" in res.verbs:
        coll["get"] = _Op("list", "list", lists, list_model)
    if "create" in res.verbs:
        coll["post"] = _Op("create", "post", kind, model)
    for verb, method, action in (
        ("get", "get", "get"),
        ("update", "put", "put"),
        ("patch", "patch", "patch"),
        ("delete", "delete", "delete"),
    ):
        if verb in res.verbs:
            op_verb = {"get": "read", "update": "replace"}.get(verb, verb)
            item[method] = _Op(op_verb, action, kind, model)
    out = {"": coll, "/{name}": item}
    for sub in res.subresources:
        if sub in SUBRESOURCE_KINDS:
            group, version, sub_kind = SUBRESOURCE_KINDS[sub]
            sub_model = models.model_for(group, version, sub_kind) or ""
            out[f"/{{name}}/{sub}"] = {
                "post": _Op("create", "post", (group, version, sub_kind), sub_model, sub_kind)
            }
        else:
            out[f"/{{name}}/{sub}"] = {
                method: _Op(op.verb, op.action, kind, model, sub.capitalize())
                for method, op in item.items()
                if method != "delete"
            }
    return out


def _root(group: str, version: str) -> str:
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


_BUILDING = threading.Lock()


def _build() -> dict[tuple[str, str], Schema]:
    """Every group-version's v3 document, generated once (requests wait for the first)."""
    with _BUILDING:
        return _generate()


@functools.cache
def _generate() -> dict[tuple[str, str], Schema]:
    schemas = Schemas()
    for res in RESOURCES:  # core kinds first: the core types they reach are named core
        model = models.model_of(res)
        if model:
            schemas.name(model, res.version, _package(res.group))
    documents: dict[tuple[str, str], Schema] = {}
    for group, versions in group_versions().items():
        for version in versions:
            documents[(group, version)] = _document(schemas, group, version)
    return documents


def _document(schemas: Schemas, group: str, version: str) -> Schema:
    tag = f"{_package(group)}_{version}"
    paths: dict[str, Schema] = {}
    roots = {schemas.name("V1Status", "v1", "core"), PATCH}
    for res in RESOURCES:
        if (res.group, res.version) != (group, version):
            continue
        base = _root(group, version)
        scoped = f"{base}/namespaces/{{namespace}}/{res.plural}" if res.namespaced else ""
        for suffix, ops in _operations(res).items():
            if not ops:
                continue
            path: Schema = {}
            for method, op in ops.items():
                if not op.model:
                    continue
                ref = schemas.name(op.model, op.kind[1], _package(op.kind[0]))
                roots.add(ref)
                path[method] = _operation(schemas, res, op, tag, ref, roots)
            params = [PRETTY_PARAM]
            if "{name}" in suffix:
                params.insert(0, _path_param("name", f"name of the {res.kind}"))
            if res.namespaced:
                params.insert(int("{name}" in suffix), NAMESPACE_PARAM)
            path["parameters"] = params
            paths[(scoped or f"{base}/{res.plural}") + suffix] = path
        if res.namespaced and "list" in res.verbs:  # the list across namespaces
            list_model = models.model_for(group, version, f"{res.kind}List") or ""
            ref = schemas.name(list_model, version, _package(group))
            op = _Op("list", "list", (group, version, f"{res.kind}List"), list_model)
            all_ns = _Op(op.verb, op.action, op.kind, op.model, "ForAllNamespaces")
            paths[f"{base}/{res.plural}"] = {
                "get": _operation(schemas, res, all_ns, tag, ref, roots),
                "parameters": [PRETTY_PARAM],
            }
    components = schemas.closure(roots)
    for res in RESOURCES:
        model = models.model_of(res)
        if (res.group, res.version) != (group, version) or model is None:
            continue
        for kind, name in (
            (res.kind, model),
            (f"{res.kind}List", models.model_for(group, version, f"{res.kind}List")),
        ):
            if name and schemas.names.get(name) in components:
                gvk = [_gvk(group, version, kind)]
                components[schemas.names[name]]["x-kubernetes-group-version-kind"] = gvk
    status = schemas.names["V1Status"]
    components[status]["x-kubernetes-group-version-kind"] = [_gvk("", "v1", "Status")]
    for sub_group, sub_version, sub_kind in SUBRESOURCE_KINDS.values():
        sub_model = models.model_for(sub_group, sub_version, sub_kind)
        name = schemas.names.get(sub_model or "")
        if name in components:
            components[name]["x-kubernetes-group-version-kind"] = [
                _gvk(sub_group, sub_version, sub_kind)
            ]
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": discovery.VERSION["gitVersion"]},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                }
            },
        },
    }


@dataclass(frozen=True, slots=True)
class Served:
    body: bytes
    etag: str


def _serve(doc: Schema) -> Served:
    body = json.dumps(doc, separators=(",", ":")).encode()
    return Served(body, hashlib.sha512(body).hexdigest().upper())


@functools.cache
def v3_documents() -> dict[str, Served]:
    """Each group-version's document by its discovery key (``api/v1``, ``apis/g/v``)."""
    return {
        _root(group, version).lstrip("/"): _serve(doc) for (group, version), doc in _build().items()
    }


@functools.cache
def v2_document() -> Served:
    """One Swagger 2.0 document: the v3 paths and schemas with v2 references."""
    paths: Schema = {}
    definitions: Schema = {}
    for doc in _build().values():
        paths.update(doc["paths"])
        definitions.update(doc["components"]["schemas"])
    swagger = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": discovery.VERSION["gitVersion"]},
        "paths": paths,
        "definitions": definitions,
    }
    text = json.dumps(swagger, separators=(",", ":")).replace(V3_REF, "#/definitions/")
    return _serve(json.loads(text))


def _accepts_json(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    if not accept.strip():
        return True
    media = {part.split(";")[0].strip() for part in accept.split(",")}
    return bool(media & {"application/json", "*/*", "application/*"})


def _answer(request: web.Request, served: Served | None) -> web.Response:
    if served is None or not _accepts_json(request):
        return web.json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "only application/json is served",
                "reason": "NotAcceptable",
                "code": 406,
            },
            status=406,
        )
    if request.headers.get("If-None-Match") == f'"{served.etag}"':
        return web.Response(status=304)
    headers = {"Etag": f'"{served.etag}"', "Vary": "Accept"}
    if request.query.get("hash") == served.etag:
        headers["Cache-Control"] = "public, immutable"
        headers["Expires"] = "Fri, 01 Jan 2100 00:00:00 GMT"
    return web.Response(body=served.body, content_type="application/json", headers=headers)


async def v3_index(request: web.Request) -> web.Response:
    documents = await asyncio.to_thread(v3_documents)  # the first call builds them (~1 s)
    listed = {
        key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={served.etag}"}
        for key, served in documents.items()
    }
    return web.json_response({"paths": listed})


async def v3_group_version(request: web.Request) -> web.Response:
    served = (await asyncio.to_thread(v3_documents)).get(request.match_info["path"])
    if served is None:
        raise web.HTTPNotFound()
    return _answer(request, served)


async def v2(request: web.Request) -> web.Response:
    if not _accepts_json(request):  # before building anything: kubectl asks this first
        return _answer(request, None)
    return _answer(request, await asyncio.to_thread(v2_document))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/openapi/v2", v2)
    app.router.add_get("/openapi/v3", v3_index)
    app.router.add_get("/openapi/v3/{path:.+}", v3_group_version)
