"""Pure: what an API request is, by verb and resource, for counting what the operator sends."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def classify(method: str, url: str) -> tuple[str, str]:
    """(verb, resource) of a request, as RBAC names them: get, list, watch, create, update,
    patch, delete; `statefulsets`, `pods/eviction`, ... A path it cannot read is ('other', '')."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if segments[:1] == ["api"]:
        rest = segments[2:]  # api/v1/...
    elif segments[:1] == ["apis"]:
        rest = segments[3:]  # apis/group/version/...
    else:
        return "other", ""
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]  # namespaces/<ns>/<resource>/...
    if not rest:
        return "other", ""
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    method = method.upper()
    if method != "GET":
        return _VERBS.get(method, method.lower()), resource
    if len(rest) > 1:
        return "get", resource
    watching = parse_qs(parts.query).get("watch", [""])[0].lower() in ("true", "1")
    return ("watch" if watching else "list"), resource
