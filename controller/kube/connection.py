"""The connection to the API server: credentials, and the count of every request sent."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import kubernetes
import structlog

from controller.core import apicalls
from controller.kube.fencing import Leadership
from controller.metrics import Metrics

log = structlog.get_logger(__name__)

WRITES = frozenset({"create", "update", "patch", "delete"})
# How often the credentials loader's hook runs (see api_client).
REFRESH_EVERY = 1.0


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
            # A write made without the Lease by design (the gates handed back as leading ends:
            # kube/fencing.py) says so, so that no reader takes it for one that escaped the fence.
            unfenced = {"unfenced": True} if leadership is not None and leadership.exempt else {}
            log.info("api write", verb=verb, resource=resource,
                     holder=leadership.holder if leadership else None, **unfenced)
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


def api_client(cfg: kubernetes.client.Configuration,
               clock: Callable[[], float] = time.monotonic) -> kubernetes.client.ApiClient:
    """A client that tries each request once: every failure reaches kube/errors.py and the work
    queue's backoff. urllib3's default would try again inside the call, unseen: a GET, PUT or
    DELETE answered 429 up to three times, each after sleeping its Retry-After in the calling
    thread (a worker, or the Lease loop past its renewal deadline), and any request, a POST
    included, after an SSL error on a reused connection (a create sent twice).

    Its credentials are refreshed at most once every REFRESH_EVERY seconds, not before every
    request: the loaders' hook (in-cluster and kubeconfig alike) sets the host again each time,
    and the host's setter reads every variable of the environment for a proxy (a pod's holds
    those of every Service in its namespace): 845 refreshes cost 3.4 s of 28.7 s profiled
    (yappi, bench-scale at 100 runs). A projected token is valid for an hour or more and the
    in-cluster loader reads its file again a minute after the last read; a provider's token
    expiring is picked up within the second."""
    cfg.retries = False
    if cfg.refresh_api_key_hook is not None:
        cfg.refresh_api_key_hook = _Throttled(cfg.refresh_api_key_hook, REFRESH_EVERY, clock)
    return kubernetes.client.ApiClient(cfg)


class _Throttled:
    """A credentials hook run at most once every `seconds`. The loaders' hooks install
    themselves again on the configuration each time they run: the newest is kept, and this one
    put back in its place."""

    def __init__(self, hook: Callable[[Any], None], seconds: float,
                 clock: Callable[[], float]) -> None:
        self.hook, self.seconds, self.clock = hook, seconds, clock
        self.last: float | None = None

    def __call__(self, cfg: Any) -> None:
        now = self.clock()
        if self.last is not None and now - self.last < self.seconds:
            return
        self.last = now  # before the call: two threads at once refresh twice, harmlessly
        self.hook(cfg)
        if cfg.refresh_api_key_hook is not self:
            self.hook, cfg.refresh_api_key_hook = cfg.refresh_api_key_hook, self
