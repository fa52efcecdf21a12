"""The leader's watch caches: what it reads instead of asking the API server per event.

One watch per kind for the whole cluster, as client-go's shared informers keep them: balloons
(StatefulSets with our labels), ResourceQuotas, LimitRanges, claims, Tasks, Pipelines, Tekton's
ResolutionRequests, our balloons' budgets (by our labels) and the nodes. Nine watches and threads
whatever the number of namespaces that opted in (a watch per kind and enabled namespace cost
five threads and five watches a namespace: 1,500 threads at 300 namespaces). Each store is
indexed by namespace, and claims and ResolutionRequests by their owner's uid, so a read returns
only what one run needs and a watch event changes one entry (kube/store.py).

The price: the stores hold these kinds for every namespace, enabled or not, as informers do
(objects small and few next to the pods and runs nobody here caches). Listeners hear only of
objects in enabled namespaces; of the nodes, of every one, the first list's included. A cache
that is not synced yet answers None, and the caller asks the API server or does without.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog

from controller.core.basics import names
from controller.core.model import resolution, tekton
from controller.kube.client import Kube, Obj
from controller.kube.clusterview import Facts
from controller.kube.reflector import Reflector, start_thread
from controller.kube.store import Indexed, key_of, namespace_of, owner_uids

log = structlog.get_logger(__name__)

OWNER = "owner"
# Kinds without a namespace: every listener hears of every object, the first list's included.
CLUSTER_SCOPED = frozenset({"nodes"})
Listener = Callable[[Mapping[str, Any]], None]
# What of an object a listener's reader reads: the listener hears of an update only when it
# differs from the version replaced (an object's status changes often; few readers read it).
Reads = Callable[[Mapping[str, Any]], object]


def hears(reads: Reads | None, obj: Mapping[str, Any], old: Mapping[str, Any] | None,
          deleted: bool = False) -> bool:
    """Whether a listener that reads `reads` of objects hears of this event (`old`: the
    version replaced, None when added)."""
    return reads is None or deleted or old is None or reads(old) != reads(obj)


class Caches:
    def __init__(self, kube: Kube, timeout: float) -> None:
        self.kube = kube
        self._enabled: frozenset[str] = frozenset()
        self._listeners: dict[str, list[tuple[Listener, Reads | None]]] = {}
        custom = kube.custom.list_cluster_custom_object
        owned = {OWNER: owner_uids}
        # kind -> (list function for all namespaces, its arguments, extra indexes)
        kinds: dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {
            "balloons": (kube.apps.list_stateful_set_for_all_namespaces, (), {}),
            "resourcequotas": (kube.core.list_resource_quota_for_all_namespaces, (), {}),
            "limitranges": (kube.core.list_limit_range_for_all_namespaces, (), {}),
            "claims": (kube.core.list_persistent_volume_claim_for_all_namespaces, (), owned),
            "tasks": (custom, (tekton.GROUP, tekton.VERSION, "tasks"), {}),
            "pipelines": (custom, (tekton.GROUP, tekton.VERSION, "pipelines"), {}),
            "resolutionrequests": (
                custom, (resolution.GROUP, resolution.VERSION, resolution.PLURAL), owned),
            "budgets": (kube.policy.list_pod_disruption_budget_for_all_namespaces, (), {}),
            "nodes": (kube.core.list_node, (), {}),
        }
        selectors = {"balloons": names.BALLOON_SELECTOR, "budgets": names.BUDGET_SELECTOR}
        self.watches: dict[str, Reflector] = {
            kind: Reflector(
                kind, fn, args, indexers=indexers, timeout=timeout,
                on_object=functools.partial(self._on_object, kind),
                label_selector=selectors.get(kind), tell_list=kind in CLUSTER_SCOPED,
            )
            for kind, (fn, args, indexers) in kinds.items()
        }

    def start(self) -> None:
        for kind, watch in self.watches.items():
            start_thread(watch.run, f"watch-{kind}")

    def stop(self) -> None:
        for watch in self.watches.values():
            watch.stop()

    # -- feeds --------------------------------------------------------------------------------

    def follow_namespaces(self, _: Facts, new: Facts) -> None:
        """Which namespaces' objects listeners hear of (a cluster-view listener)."""
        if new.synced:
            self._enabled = new.enabled_namespaces  # one reference, swapped whole

    def listen(self, kind: str, listener: Listener, reads: Reads | None = None) -> None:
        """`listener(object)` for each object of the kind in an enabled namespace that a watch
        event brings, once the cache holds it (after a relist, each that changed or vanished in
        the gap: kube/reflector.py); with `reads`, only when it is added or deleted or `reads`
        of it changed. A listener that fails is said; the watch goes on."""
        self._listeners.setdefault(kind, []).append((listener, reads))

    def _on_object(self, kind: str, obj: Mapping[str, Any],
                   old: Mapping[str, Any] | None = None, deleted: bool = False) -> None:
        listeners = self._listeners.get(kind)
        if not listeners or (kind not in CLUSTER_SCOPED and namespace_of(obj) not in self._enabled):
            return
        for listener, reads in listeners:
            if hears(reads, obj, old, deleted):
                try:
                    listener(obj)
                except Exception:  # a listener's failure must never break the watch it hears
                    log.exception("cache listener failed", kind=kind)

    # -- reads --------------------------------------------------------------------------------

    def _store(self, kind: str) -> Indexed | None:
        watch = self.watches[kind]
        return watch.store if watch.synced.is_set() else None

    def is_synced(self, kind: str) -> bool:
        return self.watches[kind].synced.is_set()

    @property
    def synced(self) -> bool:
        return self.is_synced("balloons")

    def balloon(self, namespace: str, name: str) -> Obj | None:
        return self.watches["balloons"].store.named(namespace, name)

    def balloons(self) -> list[Obj]:
        return self.watches["balloons"].store.values()

    def budgets(self) -> list[Obj] | None:
        """Our namespaces' PodDisruptionBudgets (core/placement/budget.py); None while not
        synced."""
        store = self._store("budgets")
        return None if store is None else store.values()

    def in_namespace(self, kind: str, namespace: str) -> list[Obj] | None:
        """The namespace's objects of a kind that namespaces hold few of (LimitRanges,
        ResourceQuotas); None while its watch is not synced."""
        store = self._store(kind)
        return None if store is None else store.in_namespace(namespace)

    def quotas(self, namespace: str) -> list[Obj] | None:
        return self.in_namespace("resourcequotas", namespace)

    def limit_ranges(self, namespace: str) -> list[Obj] | None:
        return self.in_namespace("limitranges", namespace)

    def owned_by(self, kind: str, uid: str) -> list[Obj] | None:
        """Claims or ResolutionRequests whose ownerReferences name this uid (a run's)."""
        store = self._store(kind)
        return None if store is None else store.by(OWNER, uid)

    def claims_of(self, namespace: str, run_uid: str, named: Iterable[str]) -> list[Obj] | None:
        """The claims a run owns and those its spec names: all a run's decision reads of the
        namespace's claims, however many it holds."""
        store = self._store("claims")
        if store is None:
            return None
        found = {str(c["metadata"]["name"]): c for c in store.by(OWNER, run_uid)}
        for name in named:
            if name not in found and (claim := store.named(namespace, name)) is not None:
                found[name] = claim
        return list(found.values())

    def holds(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """Whether the kind's store holds the object now: in a listener, False when the event
        it hears of deleted it (the store is changed before its listeners hear)."""
        return self.watches[kind].store.get(key_of(obj)) is not None

    def wait_synced(self, kind: str, timeout: float) -> bool:
        return self.watches[kind].synced.wait(timeout)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        store = self._store(kind)
        return None if store is None else store.named(namespace, name)


def balloon_of(caches: Caches | None, kube: Kube, namespace: str, name: str) -> Obj | None:
    """A balloon StatefulSet, from the watch cache once it is synced (else asked for)."""
    if caches is not None and caches.synced:
        return caches.balloon(namespace, name)
    return kube.get_statefulset(namespace, name)


def may_have_balloon(caches: Caches | None, namespace: str, name: str) -> bool:
    """False once the synced cache shows no such balloon: a finished run's events then cost
    nothing."""
    return caches is None or not caches.synced or caches.balloon(namespace, name) is not None
