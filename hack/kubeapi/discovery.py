"""``/version`` and the discovery documents, generated from ``resources.RESOURCES``.

Served in the legacy (unaggregated) form only: clients that ask for aggregated discovery
(``as=APIGroupDiscoveryList``) also accept plain ``application/json`` and fall back to
fetching ``/apis/<group>/<version>`` one by one when the Content-Type says legacy.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hack.kubeapi import resources

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4",
    "gitCommit": "59526cd4867447956156ae3a602fcbac10a2c335",
    "gitTreeState": "clean",
    "buildDate": "2025-04-22T16:02:27Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _resource_list(group: str, version: str) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for res in resources.RESOURCES:
        if (res.group, res.version) != (group, version):
            continue
        entry: dict[str, Any] = {
            "name": res.plural,
            "singularName": res.singular,
            "namespaced": res.namespaced,
            "kind": res.kind,
            "verbs": list(res.verbs),
        }
        if res.short_names:
            entry["shortNames"] = list(res.short_names)
        entries.append(entry)
        for sub in res.subresources:
            sub_entry: dict[str, Any] = {
                "name": f"{res.plural}/{sub}",
                "singularName": "",
                "namespaced": res.namespaced,
                "kind": res.kind,
                "verbs": ["get", "patch", "update"],
            }
            other = resources.SUBRESOURCE_KINDS.get(sub)
            if other:
                group_, version_, kind = other
                if group_ != res.group:  # listed only when not the parent's, as the apiserver does
                    sub_entry.update(group=group_, version=version_)
                sub_entry.update(kind=kind, verbs=["create"])
            entries.append(sub_entry)
    out: dict[str, Any] = {"kind": "APIResourceList", "groupVersion": version, "resources": entries}
    if group:
        out = {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}",
            "resources": entries,
        }
    return out


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


async def version(request: web.Request) -> web.Response:
    return web.json_response(VERSION)


async def core(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "kind": "APIVersions",
            "versions": resources.group_versions()[""],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}
            ],
        }
    )


async def core_v1(request: web.Request) -> web.Response:
    return web.json_response(_resource_list("", "v1"))


async def groups(request: web.Request) -> web.Response:
    listed = [_group(g, vs) for g, vs in resources.group_versions().items() if g]
    return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": listed})


async def group(request: web.Request) -> web.Response:
    name = request.match_info["group"]
    versions = resources.group_versions().get(name) if name else None
    if not versions:
        raise web.HTTPNotFound()
    return web.json_response({"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)})


async def group_version(request: web.Request) -> web.Response:
    name, version_ = request.match_info["group"], request.match_info["version"]
    if version_ not in (resources.group_versions().get(name) or []) or not name:
        raise web.HTTPNotFound()
    return web.json_response(_resource_list(name, version_))


async def health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/version", version)
    app.router.add_get("/version/", version)  # the Python client's VersionApi asks here
    app.router.add_get("/api", core)
    app.router.add_get("/api/v1", core_v1)
    app.router.add_get("/api/v1/", core_v1)  # the Python client's get_api_resources
    app.router.add_get("/apis", groups)
    app.router.add_get("/apis/{group}", group)
    app.router.add_get("/apis/{group}/{version}", group_version)
    for path in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(path, health)
