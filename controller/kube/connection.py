"""The connection to the API server: credentials, and the count of every request sent."""

from __future__ import annotations

from typing import Any

import kubernetes
import structlog

from controller.core import apicalls
from controller.kube.fencing import Leadership
from controller.metrics import Metrics

log = structlog.get_logger(__name__)

WRITES = frozenset({"create", "update", "patch", "delete"})


def count_requests(
    api: kubernetes.client.ApiClient, metrics: Metrics | None, leadership: Leadership | None
) -> None:
    """Every request this client sends (ours and our watch caches') counted by verb, resource
    and status: what the operator costs the API server, per run (issue: cost grows with the
    work, not with the cluster). Every write is checked against the process's Leadership
    (kube/fencing.py) before it is sent, and every write but the Lease's own is logged as it
    is sent, with the Lease holder the process acts as: the chaos benchmark and the fault
    scenarios read these lines from every replica to show that two leaders never act at once."""
    send = api.call_api

    def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        verb, resource = apicalls.classify(method, url)
        if verb in WRITES and leadership is not None:
            leadership.check(resource)
        if verb in WRITES and resource != "leases":
            log.info("api write", verb=verb, resource=resource,
                     holder=leadership.holder if leadership else None)
        code = "error"
        try:
            response = send(method, url, *args, **kwargs)
            code = str(getattr(response, "status", ""))
            return response
        finally:
            if metrics is not None:
                metrics.api_requests.labels(verb=verb, resource=resource, code=code).inc()

    api.call_api = counted  # type: ignore[method-assign]


def load_client_config() -> kubernetes.client.ApiClient:
    """In-cluster credentials when in a pod, else the kubeconfig (KUBECONFIG or ~/.kube/config)."""
    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
    return api_client(kubernetes.client.Configuration.get_default_copy())


def api_client(cfg: kubernetes.client.Configuration) -> kubernetes.client.ApiClient:
    """A client that tries each request once: every failure reaches kube/errors.py and the work
    queue's backoff. urllib3's default would try again inside the call, unseen: a GET, PUT or
    DELETE answered 429 up to three times, each after sleeping its Retry-After in the calling
    thread (a worker, or the Lease loop past its renewal deadline), and any request, a POST
    included, after an SSL error on a reused connection (a create sent twice)."""
    cfg.retries = False
    return kubernetes.client.ApiClient(cfg)
