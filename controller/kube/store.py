"""An indexed in-memory copy of one list of objects, as client-go's indexers keep them.

A watch event changes one object and its index entries (O(1) in the size of the list); a read
returns only what it asks for: one object by name, a namespace's objects, or the objects an
index maps a value to (a run's claims by owner uid). Nothing copies the whole list per event.

`touched` counts the objects every write and read has visited, so that tests can show an
event's cost does not depend on how many objects the list or the namespace holds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

Obj = dict[str, Any]
# An index: the values an object is filed under (an owner's uid, a label's value).
Indexer = Callable[[Mapping[str, Any]], Iterable[str]]


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def owner_uids(obj: Mapping[str, Any]) -> Iterable[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(r.get("uid")) for r in refs if isinstance(r, Mapping) and r.get("uid")]


NAMESPACE = "namespace"


class Listing(Protocol):
    """What a reader of a whole (small) list needs: a dict is one, an Indexed is one."""

    def get(self, key: str, /) -> Obj | None: ...

    def values(self) -> Iterable[Obj]: ...


class Indexed:
    """Thread-safe. Always indexed by namespace; more indexes by name."""

    def __init__(self, indexers: Mapping[str, Indexer] | None = None) -> None:
        self._indexers: dict[str, Indexer] = {NAMESPACE: lambda o: (namespace_of(o),),
                                              **(indexers or {})}
        self._lock = threading.Lock()
        self._objects: dict[str, Obj] = {}
        self._filed: dict[str, dict[str, tuple[str, ...]]] = {}  # key -> index -> values
        self._indexes: dict[str, dict[str, dict[str, Obj]]] = {n: {} for n in self._indexers}
        self.touched = 0

    # -- writes -------------------------------------------------------------------------------

    def replace(self, objects: Iterable[Obj]) -> None:
        """A relist: the store becomes exactly these objects."""
        with self._lock:
            self._objects.clear()
            self._filed.clear()
            for index in self._indexes.values():
                index.clear()
            for obj in objects:
                self._put(obj)

    def upsert(self, obj: Obj) -> Obj | None:
        """Files the object; returns the one it replaces (None: new)."""
        with self._lock:
            old = self._drop(key_of(obj))
            self._put(obj)
            return old

    def delete(self, obj: Mapping[str, Any]) -> Obj | None:
        with self._lock:
            return self._drop(key_of(obj))

    def _put(self, obj: Obj) -> None:
        key = key_of(obj)
        self.touched += 1
        self._objects[key] = obj
        filed = {name: tuple(fn(obj)) for name, fn in self._indexers.items()}
        self._filed[key] = filed
        for name, values in filed.items():
            for value in values:
                self._indexes[name].setdefault(value, {})[key] = obj

    def _drop(self, key: str) -> Obj | None:
        old = self._objects.pop(key, None)
        if old is None:
            return None
        self.touched += 1
        for name, values in self._filed.pop(key, {}).items():
            index = self._indexes[name]
            for value in values:
                bucket = index.get(value)
                if bucket is not None:
                    bucket.pop(key, None)
                    if not bucket:
                        del index[value]
        return old

    # -- reads --------------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        """By "namespace/name"."""
        with self._lock:
            self.touched += 1
            return self._objects.get(key)

    def named(self, namespace: str, name: str) -> Obj | None:
        return self.get(f"{namespace}/{name}")

    def by(self, index: str, value: str) -> list[Obj]:
        """The objects an index files under this value."""
        with self._lock:
            found = list((self._indexes[index].get(value) or {}).values())
            self.touched += len(found)
            return found

    def in_namespace(self, namespace: str) -> list[Obj]:
        return self.by(NAMESPACE, namespace)

    def values(self) -> list[Obj]:
        """Every object: for lists that stay small (namespaces, policies, config)."""
        with self._lock:
            self.touched += len(self._objects)
            return list(self._objects.values())

    def __len__(self) -> int:
        return len(self._objects)
