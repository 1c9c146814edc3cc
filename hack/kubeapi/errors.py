"""API errors as the apiserver writes them: a ``Status`` object with the HTTP code inside.

Clients branch on ``code`` and ``reason`` (the Python client raises ``ApiException`` with
``status == code``; client-go maps ``reason`` to ``IsConflict``/``IsNotFound``), so every
failure the emulator returns goes through one of the constructors below, which copy the
message formats of ``k8s.io/apimachinery/pkg/api/errors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ApiError(Exception):
    """Raised anywhere in a request; the dispatcher turns it into the response."""

    def __init__(self, status: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        super().__init__(status.get("message", ""))
        self.status = status
        self.headers = headers or {}

    @property
    def code(self) -> int:
        return int(self.status["code"])


def status(
    code: int,
    reason: str,
    message: str,
    details: dict[str, Any] | None = None,
    *,
    success: bool = False,
) -> dict[str, Any]:
    """A ``v1.Status``; an empty ``reason`` and a zero ``code`` are left out as ``omitempty``
    does (a delete's Success Status carries no code)."""
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if success else "Failure",
    }
    if message:
        out["message"] = message
    if reason:
        out["reason"] = reason
    if details:
        out["details"] = details
    if code:
        out["code"] = code
    return out


def _details(group_resource: str, name: str) -> dict[str, Any]:
    resource, _, group = group_resource.partition(".")
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    return details


def not_found(group_resource: str, name: str) -> ApiError:
    return ApiError(
        status(
            404, "NotFound", f'{group_resource} "{name}" not found', _details(group_resource, name)
        )
    )


def already_exists(group_resource: str, name: str) -> ApiError:
    return ApiError(
        status(
            409,
            "AlreadyExists",
            f'{group_resource} "{name}" already exists',
            _details(group_resource, name),
        )
    )


def conflict(group_resource: str, name: str, why: str) -> ApiError:
    return ApiError(
        status(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {group_resource} "{name}": {why}',
            _details(group_resource, name),
        )
    )


MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def bad_request(message: str) -> ApiError:
    return ApiError(status(400, "BadRequest", message))


def int_query(query: Mapping[str, str], name: str) -> int:
    """A whole-number query parameter (``limit``, ``timeoutSeconds``), 0 when absent;
    anything else is a 400, as the apiserver answers it."""
    try:
        return int(query.get(name) or 0)
    except ValueError as e:
        raise bad_request(f"{name}: Invalid value: {query[name]!r}") from e


def invalid(kind: str, name: str, causes: list[dict[str, str]], group: str = "") -> ApiError:
    """422 with one cause per field, as ``NewInvalid`` aggregates ``field.ErrorList``."""
    text = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    shown = f"[{text}]" if len(causes) > 1 else text
    qualified = f"{kind}.{group}" if group else kind  # GroupKind.String()
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details.update(kind=kind, causes=causes)
    return ApiError(status(422, "Invalid", f'{qualified} "{name}" is invalid: {shown}', details))


def forbidden(group_resource: str, name: str, why: str) -> ApiError:
    return ApiError(
        status(
            403,
            "Forbidden",
            f'{group_resource} "{name}" is forbidden: {why}',
            _details(group_resource, name),
        )
    )


def too_many_requests(message: str, cause: str, retry_after_s: int = 0) -> ApiError:
    """429 as ``NewTooManyRequests``: ``retryAfterSeconds`` (and the header) only when set."""
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers: dict[str, str] = {}
    if retry_after_s:
        details = {"retryAfterSeconds": retry_after_s, **details}
        headers["Retry-After"] = str(retry_after_s)
    return ApiError(status(429, "TooManyRequests", message, details), headers)


def expired(message: str) -> ApiError:
    return ApiError(status(410, "Expired", message))


def method_not_allowed(message: str) -> ApiError:
    return ApiError(status(405, "MethodNotAllowed", message))


def unsupported_media_type(accepted: tuple[str, ...] | None = None) -> ApiError:
    """415 naming what the endpoint decodes (the patch types unless ``accepted`` says)."""
    return ApiError(
        status(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted or PATCH_TYPES),
        )
    )


PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


def unauthorized() -> ApiError:
    return ApiError(status(401, "Unauthorized", "Unauthorized"))


def internal(message: str) -> ApiError:
    """What a plain Go ``error`` (not a ``StatusError``) becomes: 500 with reason
    ``StatusReasonUnknown``, which is the empty string, so the Status carries no reason."""
    return ApiError(status(500, "", message))


OPTIONS_KINDS = {
    "create": "CreateOptions",
    "update": "UpdateOptions",
    "patch": "PatchOptions",
    "delete": "DeleteOptions",
}


def unsupported_option(verb: str, field: str, value: str, allowed: tuple[str, ...]) -> ApiError:
    """422 for a query option the apiserver's options validation refuses (``fieldValidation``,
    ``dryRun``): ``CreateOptions.meta.k8s.io "" is invalid: ...``."""
    listed = ", ".join(f'"{a}"' for a in allowed)
    cause = {
        "reason": "FieldValueNotSupported",
        "field": field,
        "message": f'Unsupported value: "{value}": supported values: {listed}',
    }
    return invalid(OPTIONS_KINDS.get(verb, "CreateOptions"), "", [cause], "meta.k8s.io")
