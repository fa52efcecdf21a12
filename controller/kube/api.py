"""The transport under kube/client.py: requests whose answers are read as bytes and decoded
with orjson (never built into the client library's models), and the API server's own words for
a failure. Blocking calls; run them off the event loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import kubernetes
import orjson
from kubernetes.client.exceptions import ApiException

from controller.kube import connection
from controller.kube.fencing import Leadership
from controller.metrics import Metrics

Obj = dict[str, Any]
# What the layers above catch: they never import the client library themselves.
ApiError = ApiException


def api_message(exc: ApiException) -> str:
    """The API server's own words for a failed request."""
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except ValueError:
        return str(exc.reason)


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
        self.core = kubernetes.client.CoreV1Api(api)
        self.apps = kubernetes.client.AppsV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.coordination = kubernetes.client.CoordinationV1Api(api)
        self.policy = kubernetes.client.PolicyV1Api(api)

    def json(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        resp = fn(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
        data: Obj = orjson.loads(resp.data)
        return data

    def send(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """A write whose answer is not used: the answer is read as bytes and dropped, never
        built into the client's models (a 12 KB pod's V1Pod took 0.6 to 1.2 ms of CPU to
        build here, for every write)."""
        resp = fn(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
        resp.read()  # to its end, so that the connection goes back to the pool
        resp.release_conn()

    def items(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Obj]:
        items: list[Obj] = self.json(fn, *args, **kwargs).get("items") or []
        return items

    def get_or_none(self, fn: Callable[..., Any], *args: Any) -> Obj | None:
        try:
            return self.json(fn, *args)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _create_new(self, fn: Callable[..., Any], manifest: Mapping[str, Any]) -> bool:
        """Creates it; False if one of that name exists."""
        try:
            self.send(fn, manifest["metadata"]["namespace"], dict(manifest))
        except ApiException as exc:
            if exc.status != 409:
                raise
            return False
        return True

    def _unless_conflict(self, fn: Callable[..., Any], *args: Any) -> bool:
        """True if the write went through; False on 409 (someone else wrote first)."""
        try:
            self.send(fn, *args)  # plain dicts are sent as they are
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
