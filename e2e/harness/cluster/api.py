"""What the parts of the harness need of a cluster: an admin client and patience.

The handle (handle.py) composes the parts (Tekton, CRDs, cert-manager); the parts take a
ClusterApi, never the handle, so that nothing imports its way back up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

T = TypeVar("T")


def present(value: T | None) -> T:
    """A field the kubernetes client types Optional (an object's metadata, spec, status...)
    that an object read back from the API server has: the value, typed as set."""
    assert value is not None, "a field the API server always sets is missing"
    return value


class Named(Protocol):
    """Any object of the client's models: its metadata is typed Optional."""

    @property
    def metadata(self) -> client.V1ObjectMeta | None: ...


def name_of(obj: Named) -> str:
    """The name of an object read back from the API server (it has metadata and a name)."""
    return present(present(obj.metadata).name)


class ClusterApi:
    """A cluster reached through a kubeconfig file (set once the cluster runs)."""

    def __init__(self) -> None:
        self.kubeconfig: Path = Path()
        # Tekton's controller runs and reads its ConfigMaps (set by the handle's start_tekton).
        self.tekton_running = False

    def api_client(self) -> client.ApiClient:
        """A new client authenticated as cluster admin; close it (or use `with`) when done."""
        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig), client_configuration=cfg
        )
        return client.ApiClient(cfg)

    def wait_for(
        self,
        predicate: Callable[[], T | None],
        timeout: float = 60.0,
        what: str = "condition",
        interval: float = 0.5,
    ) -> T:
        """Polls predicate() until it returns something truthy, and returns that."""
        deadline = time.monotonic() + timeout
        last_error: ApiException | None = None
        while True:
            try:
                result = predicate()
                if result:
                    return result
            except ApiException as e:  # e.g. 404 until the object exists
                last_error = e
            if time.monotonic() >= deadline:
                detail = ""
                if last_error is not None:
                    detail = f" (last API error: {last_error.status} {last_error.reason})"
                raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}{detail}")
            time.sleep(interval)


def create_once(create: Callable[[], T], get: Callable[[], T]) -> T:
    """create(), or get() when the answer is a 409: for an object under a name no one else
    uses, that means an earlier send of this same create made it and its answer was lost.
    urllib3 resends any request, a POST included, after an SSL error on a reused connection
    (its "other" retries): the likeliest reason CI once got AlreadyExists for a run Tekton had
    started half a second before (the logs cannot show which)."""
    try:
        return create()
    except ApiException as e:
        if e.status != 409:
            raise
    return get()
