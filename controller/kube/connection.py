"""The connection to the API server: credentials, and the count of every request sent."""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import structlog

from controller.core.replica import apicalls
from controller.kube.fencing import Leadership
from controller.metrics import Metrics

log = structlog.get_logger(__name__)

WRITES = frozenset({"create", "update", "patch", "delete"})
# Writes not logged: the Lease's renewals (every few seconds), and the access reviews `check`
# asks, which change nothing (and would fall among the document `-o json` prints).
UNLOGGED = frozenset({"leases", "subjectaccessreviews", "selfsubjectaccessreviews"})
# How often the credentials loader's hook runs (see api_client).
REFRESH_EVERY = 1.0
# What the kubelet mounts in a pod: its ServiceAccount's token and namespace.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


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
        if verb in WRITES and resource not in UNLOGGED:
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


# The cluster named on the command line (--kubeconfig, --context), for every connection this
# process makes: the operator's own clients, kopf's, and those of the reconciler it starts.
_named: tuple[str | None, str | None] = (None, None)


def name_cluster(kubeconfig: str | None, context: str | None) -> None:
    global _named
    _named = (kubeconfig, context)


def named_flags() -> list[str]:
    """The flags that name the same cluster to a child process (the reconciler)."""
    kubeconfig, context = _named
    return ([f"--kubeconfig={kubeconfig}"] if kubeconfig else []) + (
        [f"--context={context}"] if context else [])


def load_client_config() -> kubernetes.client.ApiClient:
    """The operator's own (`run`, `reconcile`): the cluster named on the command line if one
    was; else in-cluster credentials when in a pod, else the kubeconfig (KUBECONFIG or
    ~/.kube/config)."""
    if any(_named):
        return connect(*_named).client
    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
    return api_client(kubernetes.client.Configuration.get_default_copy())


class ConfigError(Exception):
    """No cluster to talk to: no kubeconfig, a context it does not name, a file it cannot read."""


@dataclass(frozen=True)
class Target:
    """The cluster a command talks to, as kubectl would choose it."""

    client: kubernetes.client.ApiClient
    namespace: str  # the context's namespace, or the pod's own; "default" when none is said
    in_cluster: bool


def connect(kubeconfig: str | None = None, context: str | None = None) -> Target:
    """kubectl's choice: a kubeconfig or a context named (`--kubeconfig`, `--context`) is that
    kubeconfig; else the pod's own ServiceAccount when in a pod; else KUBECONFIG or
    ~/.kube/config, at its current context."""
    cfg = kubernetes.client.Configuration()
    if not kubeconfig and not context:
        try:
            kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=cfg)
        except kubernetes.config.ConfigException:
            pass
        else:
            return Target(api_client(cfg), pod_namespace() or "default", in_cluster=True)
    # KUBECONFIG as it is now (the client library reads it once, when imported); it may
    # name several files, merged as kubectl merges them.
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=cfg)
        contexts, current = kubernetes.config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=kubeconfig)
    except (kubernetes.config.ConfigException, OSError, ValueError) as exc:
        where = kubeconfig or "KUBECONFIG or ~/.kube/config"
        raise ConfigError(f"no usable kubeconfig ({where}): {exc}") from None
    chosen = next((c for c in contexts or [] if c.get("name") == context), None) or current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return Target(api_client(cfg), str(namespace or "default"), in_cluster=False)


def kopf_credentials() -> dict[str, Any] | None:
    """When a cluster was named on the command line, what kopf's ConnectionInfo is to hold for
    it (kopf's own login knows in-cluster credentials and the default kubeconfig only); None:
    kopf's own login. The same reading of the client's configuration as kopf's login."""
    if not any(_named):
        return None
    cfg = connect(*_named).client.configuration
    header = (cfg.get_api_key_with_prefix("BearerToken")
              or cfg.get_api_key_with_prefix("authorization"))
    scheme, _, token = str(header or "").rpartition(" ")
    return {"server": cfg.host, "ca_path": cfg.ssl_ca_cert, "insecure": not cfg.verify_ssl,
            "username": cfg.username or None, "password": cfg.password or None,
            "scheme": scheme or None, "token": token or None,
            "certificate_path": cfg.cert_file, "private_key_path": cfg.key_file}


def pod_namespace() -> str | None:
    """The namespace of the pod this runs in, as the kubelet mounted it; None outside a pod."""
    try:
        return (SERVICE_ACCOUNT_DIR / "namespace").read_text().strip() or None
    except OSError:
        return None


def pod_service_account() -> tuple[str, str] | None:
    """(namespace, name) of the ServiceAccount whose token the kubelet mounted in this pod, read
    from the token's own claims (its subject, system:serviceaccount:<ns>:<name>); None outside
    a pod or for a token that is not a ServiceAccount's. The token is not verified: it only
    says whom to ask the API server about."""
    try:
        token = (SERVICE_ACCOUNT_DIR / "token").read_text().strip()
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (OSError, IndexError, ValueError, binascii.Error):
        return None
    parts = str(claims.get("sub") if isinstance(claims, dict) else "").split(":")
    if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] and all(parts[2:]):
        return parts[2], parts[3]
    return None


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
