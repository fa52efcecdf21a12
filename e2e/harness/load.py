"""Pod creations at a steady rate through admission, as Tekton makes TaskRun pods under load,
each answer checked: created with the affinity term, or refused (and what the API server said).

For the rollout scenarios: whatever happens to the replicas meanwhile, every creation must
succeed and carry the term.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.core.admission import affinity
from e2e.harness.cluster.api import ClusterApi, name_of
from tests import factories


class PodLoad:
    """`rate` TaskRun pods a second in `namespace` until the block ends (or `seconds` pass).
    With `dry_run` the API server admits them and stores nothing (real nodes are spared a
    thousand pods); else they name a scheduler nobody runs, so that they cost the API server
    only."""

    def __init__(self, cluster: ClusterApi, namespace: str, rate: float, *,
                 dry_run: bool = False, seconds: float = 600, workers: int = 12) -> None:
        self.cluster, self.namespace, self.rate = cluster, namespace, rate
        self.dry_run, self.seconds, self.workers = dry_run, seconds, workers
        self.created: list[str] = []
        self.failures: list[str] = []  # "<unix time> <status> <reason>: <body>"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._load, name="pod-load", daemon=True)
        self._local = threading.local()

    def __enter__(self) -> PodLoad:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(60)

    def _load(self) -> None:
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            started, i = time.monotonic(), 0
            while not self._stop.is_set() and time.monotonic() - started < self.seconds:
                time.sleep(max(0.0, started + i / self.rate - time.monotonic()))
                pool.submit(self._create, i)
                i += 1

    def _create(self, i: int) -> None:
        if not hasattr(self._local, "api"):
            self._local.api = self.cluster.api_client()
        api = self._local.api
        pod = factories.taskrun_pod(run=f"load-{i % 20}", task=f"t{i}", namespace=self.namespace)
        pod["metadata"]["name"] = f"load-{i}-{int(time.time())}"
        pod["spec"]["schedulerName"] = "e2e-nobody"
        try:
            made = client.CoreV1Api(api).create_namespaced_pod(
                self.namespace, pod, dry_run="All" if self.dry_run else None)  # type: ignore[arg-type]
        except ApiException as e:
            self.failures.append(f"{time.time():.3f} {e.status} {e.reason}: {(e.body or '')[:300]}")
            return
        if affinity.balloon_terms(api.sanitize_for_serialization(made)["spec"]):
            self.created.append(name_of(made))
        else:
            self.failures.append(f"{time.time():.3f} {name_of(made)} made without the term")
