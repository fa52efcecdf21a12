"""The leader's watch caches: what it reads instead of asking the API server per event.

Balloons (StatefulSets with our labels, every namespace), ResourceQuotas (every namespace) and,
in the namespaces that opted in,
claims, LimitRanges, Tasks, Pipelines and Tekton's ResolutionRequests (a watch per kind and
enabled namespace, started and stopped as namespaces opt in and out: the rest of the cluster
costs nothing). A cache that is not synced yet answers None, and the caller asks the API server
or does without.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from controller.core import names, resolution, tekton
from controller.kube.client import Kube, Obj
from controller.kube.clusterview import Facts
from controller.kube.reflector import Reflector, Store, start_thread


class Caches:
    def __init__(self, kube: Kube, timeout: float) -> None:
        self.kube = kube
        self.timeout = timeout
        self._lock = threading.Lock()
        self._balloons: Store = {}
        custom = kube.custom.list_namespaced_custom_object
        # kind -> (list function, its arguments around the namespace)
        self._kinds: dict[str, tuple[Any, tuple[Any, ...], tuple[Any, ...]]] = {
            "claims": (kube.core.list_namespaced_persistent_volume_claim, (), ()),
            "limitranges": (kube.core.list_namespaced_limit_range, (), ()),
            "tasks": (custom, (tekton.GROUP, tekton.VERSION), ("tasks",)),
            "pipelines": (custom, (tekton.GROUP, tekton.VERSION), ("pipelines",)),
            "resolutionrequests": (
                custom, (resolution.GROUP, resolution.VERSION), (resolution.PLURAL,)
            ),
        }
        self._listeners: dict[str, list[Callable[[Mapping[str, Any]], None]]] = {}
        self._stores: dict[tuple[str, str], Store] = {}  # (kind, namespace) -> objects
        self._watches: dict[tuple[str, str], Reflector] = {}
        self._active = False  # only a leader keeps these caches
        self.balloon_watch = Reflector(
            "balloons",
            kube.apps.list_stateful_set_for_all_namespaces,
            (),
            self._on_balloons,
            label_selector=names.BALLOON_SELECTOR,
            timeout=timeout,
        )
        # ResourceQuotas of every namespace (few objects, one watch): what a reservation may
        # take of a team's quota (core/quota.py).
        self._quotas: dict[str, list[Obj]] = {}
        self.quota_watch = Reflector(
            "resourcequotas",
            kube.core.list_resource_quota_for_all_namespaces,
            (),
            self._on_quotas,
            timeout=timeout,
        )

    def start(self) -> None:
        self._active = True
        start_thread(self.balloon_watch.run, "watch-balloons")
        start_thread(self.quota_watch.run, "watch-resourcequotas")

    def stop(self) -> None:
        self.balloon_watch.stop()
        self.quota_watch.stop()
        with self._lock:
            for watch in self._watches.values():
                watch.stop()

    # -- feeds --------------------------------------------------------------------------------

    def _on_balloons(self, store: Store) -> None:
        with self._lock:
            self._balloons = store

    def _on_quotas(self, store: Store) -> None:
        by_namespace: dict[str, list[Obj]] = {}
        for obj in store.values():
            by_namespace.setdefault(str((obj.get("metadata") or {}).get("namespace")), []).append(
                obj)
        with self._lock:
            self._quotas = by_namespace

    def follow_namespaces(self, _: Facts, new: Facts) -> None:
        """Watches the enabled namespaces only (a cluster-view listener)."""
        if not (self._active and new.synced):
            return
        with self._lock:
            wanted = {(kind, ns) for kind in self._kinds for ns in new.enabled_namespaces}
            for key in set(self._watches) - wanted:
                self._watches.pop(key).stop()
                self._stores.pop(key, None)
            added = [key for key in wanted if key not in self._watches]
            for kind, ns in added:
                fn, before, after = self._kinds[kind]
                self._watches[(kind, ns)] = Reflector(
                    f"{kind}-{ns}",
                    fn,
                    (*before, ns, *after),
                    functools.partial(self._on_store, (kind, ns)),
                    timeout=self.timeout,
                    on_object=functools.partial(self._on_object, kind),
                )
        for key in added:
            start_thread(self._watches[key].run, f"watch-{key[0]}-{key[1]}")

    def listen(self, kind: str, listener: Callable[[Mapping[str, Any]], None]) -> None:
        """`listener(object)` for each object of the kind that a watch event brings, once the
        cache holds it (a relist tells nothing: the resync is there for what was missed)."""
        self._listeners.setdefault(kind, []).append(listener)

    def _on_object(self, kind: str, obj: Mapping[str, Any]) -> None:
        for listener in self._listeners.get(kind, ()):
            listener(obj)

    def _on_store(self, key: tuple[str, str], store: Store) -> None:
        with self._lock:
            if key in self._watches:
                self._stores[key] = store

    # -- reads --------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return self.balloon_watch.synced.is_set()

    def balloon(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._balloons.get(f"{namespace}/{name}")

    def balloons(self) -> list[Obj]:
        with self._lock:
            return list(self._balloons.values())

    def listed(self, kind: str, namespace: str) -> list[Mapping[str, Any]] | None:
        """The namespace's objects of a kind; None while its watch is not synced (or the
        namespace is not enabled)."""
        with self._lock:
            store = self._stores.get((kind, namespace))
            return list(store.values()) if store is not None else None

    def quotas(self, namespace: str) -> list[Obj] | None:
        """The namespace's ResourceQuotas; None while the watch is not synced."""
        if not self.quota_watch.synced.is_set():
            return None
        with self._lock:
            return list(self._quotas.get(namespace, ()))

    def pvcs(self, namespace: str) -> list[Mapping[str, Any]] | None:
        return self.listed("claims", namespace)

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        with self._lock:
            return (self._stores.get((kind, namespace)) or {}).get(f"{namespace}/{name}")
