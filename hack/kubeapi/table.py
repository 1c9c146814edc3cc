"""``meta.k8s.io/v1`` Table output, which ``kubectl get`` asks for in its Accept header.

Each kind gets the columns of its printer (:mod:`hack.kubeapi.printers`). Asking for a
Table while also accepting plain JSON is how kubectl negotiates; a client that accepts
neither gets 406.
"""

from __future__ import annotations

from typing import Any

from hack.kubeapi import errors, printers


def negotiate(accept: str) -> str | None:
    """The Table version to answer with, or None for plain JSON; 406 if neither fits."""
    plain = not accept.strip()
    for part in accept.split(","):
        media, *raw = (p.strip() for p in part.split(";"))
        params = dict(p.split("=", 1) for p in raw if "=" in p)
        if media in ("application/json", "*/*", "application/*") and "as" not in params:
            plain = True
        elif (
            media == "application/json"
            and params.get("as") == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in ("v1", "v1beta1")
        ):
            return params["v"]
    if not plain:
        raise errors.ApiError(
            errors.status(
                406,
                "NotAcceptable",
                "only the following media types are accepted: application/json, "
                "application/json;as=Table;v=v1;g=meta.k8s.io",
            )
        )
    return None


def convert(
    obj: dict[str, Any], include: str, version: str, now: float, *, columns: bool = True
) -> dict[str, Any]:
    """A single object or a list as a Table with the kind's columns
    (:mod:`hack.kubeapi.printers`, ages against ``now``, Unix seconds); rows carry the
    object as ``includeObject`` says. ``columns=False`` leaves the definitions out (watch
    events after the first)."""
    is_list = "items" in obj
    items = obj["items"] if is_list else [obj]
    kind = obj["kind"].removesuffix("List")
    rows = []
    for item in items:
        md = item.get("metadata", {})
        cells, conditions = printers.row(kind, item, now)
        row: dict[str, Any] = {"cells": cells}
        if conditions:
            row["conditions"] = conditions
        if include == "Object":
            row["object"] = {"kind": kind, "apiVersion": obj["apiVersion"], **item}
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": f"meta.k8s.io/{version}",
                "metadata": md,
            }
        rows.append(row)
    meta = (
        obj["metadata"] if is_list else {"resourceVersion": obj["metadata"].get("resourceVersion")}
    )
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": meta,
        "columnDefinitions": [c.definition() for c in printers.printer(kind).columns]
        if columns
        else [],
        "rows": rows,
    }
