"""The leader's watch caches: what it reads instead of asking the API server per event.

Balloons (StatefulSets with our labels, every namespace) and the claims of the namespaces that
opted in (a watch per enabled namespace, started and stopped as namespaces opt in and out:
claims of the rest of the cluster cost nothing). A cache that is not synced yet answers None,
and the caller asks the API server instead.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import Any

from controller.core import names
from controller.kube.client import Kube, Obj
from controller.kube.clusterview import Facts
from controller.kube.reflector import Reflector, Store, start_thread


class Caches:
    def __init__(self, kube: Kube, timeout: float) -> None:
        self.kube = kube
        self.timeout = timeout
        self._lock = threading.Lock()
        self._balloons: Store = {}
        self._pvcs: dict[str, Store] = {}
        self._pvc_watches: dict[str, Reflector] = {}
        self._active = False  # only a leader keeps these caches
        self.balloon_watch = Reflector(
            "balloons",
            kube.apps.list_stateful_set_for_all_namespaces,
            (),
            self._on_balloons,
            label_selector=names.BALLOON_SELECTOR,
            timeout=timeout,
        )

    def start(self) -> None:
        self._active = True
        start_thread(self.balloon_watch.run, "watch-balloons")

    def stop(self) -> None:
        self.balloon_watch.stop()
        with self._lock:
            for watch in self._pvc_watches.values():
                watch.stop()

    # -- feeds --------------------------------------------------------------------------------

    def _on_balloons(self, store: Store) -> None:
        with self._lock:
            self._balloons = store

    def follow_namespaces(self, _: Facts, new: Facts) -> None:
        """Watches the claims of the enabled namespaces only (a cluster-view listener)."""
        if not (self._active and new.synced):
            return
        with self._lock:
            wanted = set(new.enabled_namespaces)
            for ns in set(self._pvc_watches) - wanted:
                self._pvc_watches.pop(ns).stop()
                self._pvcs.pop(ns, None)
            added = [ns for ns in wanted if ns not in self._pvc_watches]
            for ns in added:
                self._pvc_watches[ns] = Reflector(
                    f"claims-{ns}",
                    self.kube.core.list_namespaced_persistent_volume_claim,
                    (ns,),
                    functools.partial(self._on_pvcs, ns),
                    timeout=self.timeout,
                )
        for ns in added:
            start_thread(self._pvc_watches[ns].run, f"watch-claims-{ns}")

    def _on_pvcs(self, namespace: str, store: Store) -> None:
        with self._lock:
            if namespace in self._pvc_watches:
                self._pvcs[namespace] = store

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

    def pvcs(self, namespace: str) -> list[Mapping[str, Any]] | None:
        """The namespace's claims; None while its watch is not synced (or it is not enabled)."""
        with self._lock:
            store = self._pvcs.get(namespace)
            return list(store.values()) if store is not None else None
