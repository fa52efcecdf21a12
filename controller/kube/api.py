"""The transport under kube/client.py: requests by path, their answers read as bytes and decoded
with orjson (never built into the client library's models), and the API server's own words for
a failure. Blocking calls; run them off the event loop.

A request goes to the client library's `call_api` (its TLS pool, and the count and the fence of
kube/connection.py), never through its generated methods: those validate every argument with
pydantic and walk every body before sending it. Against a real API server a call costs this
process some 2 ms of CPU here either way, most of it the request itself (urllib3, http.client,
TLS); by path, 1.2x less on average and 1.5x less for a create (bench/client_calls.py). Watches
and the lists under them still open through the generated list methods (kube/reflector.py):
once per stream, not once per run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import kubernetes
import orjson
from kubernetes.client.exceptions import ApiException

from controller.kube import connection
from controller.kube.fencing import Leadership
from controller.metrics import Metrics

Obj = dict[str, Any]
# What the layers above catch: they never import the client library themselves.
ApiError = ApiException

JSON = "application/json"
MERGE = "application/merge-patch+json"  # custom resources: the only patch they take
STRATEGIC = "application/strategic-merge-patch+json"  # built-in kinds: lists merged by key


def api_message(exc: ApiException) -> str:
    """The API server's own words for a failed request."""
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except ValueError:
        return str(exc.reason)


def path(group_version: str, plural: str, namespace: str | None = None,
         name: str | None = None, sub: str | None = None) -> str:
    """A resource's path: `v1` is the core group (/api/v1), anything else /apis/<group/version>;
    a namespace, a name and a subresource when given, each escaped."""
    parts = ["/api/v1" if group_version == "v1" else f"/apis/{group_version}"]
    if namespace:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
    if sub:
        parts.append(sub)
    return "/".join(parts)


class Api:
    def __init__(
        self,
        api: kubernetes.client.ApiClient,
        timeout: float = 30.0,
        metrics: Metrics | None = None,
        leadership: Leadership | None = None,
    ) -> None:
        self.api = api
        self.timeout = timeout
        # The Lease this process writes under (kube/fencing.py); None: a process that writes
        # nothing it must fence (the admission server).
        self.leadership = leadership
        connection.count_requests(api, metrics, leadership)
        # The generated methods the watches and their lists open through (see above).
        self.core = kubernetes.client.CoreV1Api(api)
        self.apps = kubernetes.client.AppsV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.policy = kubernetes.client.PolicyV1Api(api)

    def request(self, method: str, url_path: str, body: Any = None,
                query: Mapping[str, Any] | None = None, content_type: str = JSON) -> Any:
        """Sends it; the raw answer (urllib3's) of a 2xx, else the ApiException the client's own
        methods raise (its status, the server's body and headers: Retry-After included)."""
        cfg = self.api.configuration
        wanted = {k: v for k, v in (query or {}).items() if v is not None}
        url = cfg.host + url_path + (f"?{urlencode(wanted)}" if wanted else "")
        headers = {**self.api.default_headers, "Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        for auth in cfg.auth_settings().values():  # a bearer token, refreshed as it expires
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        answer: Any = self.api.call_api(method, url, header_params=headers, body=body,
                                        _request_timeout=self.timeout)
        if not 200 <= answer.status <= 299:
            answer.read()
            raise ApiException.from_response(http_resp=answer, body=None, data=None)
        return answer.response

    def json(self, method: str, url_path: str, body: Any = None,
             query: Mapping[str, Any] | None = None) -> Obj:
        data: Obj = orjson.loads(self.request(method, url_path, body, query).data)
        return data

    def send(self, method: str, url_path: str, body: Any = None,
             content_type: str = JSON) -> None:
        """A write whose answer is not used: read as bytes and dropped, never decoded."""
        resp = self.request(method, url_path, body, content_type=content_type)
        resp.read()  # to its end, so that the connection goes back to the pool
        resp.release_conn()

    def items(self, url_path: str, **query: Any) -> list[Obj]:
        items: list[Obj] = self.json("GET", url_path, query=query).get("items") or []
        return items

    def get_or_none(self, url_path: str) -> Obj | None:
        try:
            return self.json("GET", url_path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _create_new(self, url_path: str, manifest: Mapping[str, Any]) -> bool:
        """Creates it; False if one of that name exists."""
        try:
            self.send("POST", url_path, dict(manifest))
        except ApiException as exc:
            if exc.status != 409:
                raise
            return False
        return True

    def _unless_conflict(self, method: str, url_path: str, body: Mapping[str, Any]) -> bool:
        """True if the write went through; False on 409 (someone else wrote first)."""
        try:
            self.send(method, url_path, dict(body))
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
