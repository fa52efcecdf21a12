"""Watch caches: an indexed in-memory copy of a list of objects, kept current by list-then-watch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import orjson
import structlog
from kubernetes.client.exceptions import ApiException

from controller.kube import errors
from controller.kube.store import Indexed, Indexer, Obj, key_of

log = structlog.get_logger(__name__)

PAGE = 500
# A watch that ran this long before it broke was healthy: the next one waits the shortest pause.
HEALTHY = 10.0
# Seconds between tries while the API server refuses connections (run_forever).
UNREACHABLE_PAUSE = 2.0


class Reflector:
    """Keeps an in-memory copy of one list of objects current: list, then watch from there.

    Independent of kopf on purpose: every replica keeps it, whether or not it is the leader,
    so webhook answers never depend on which replica is asked.
    """

    def __init__(
        self,
        name: str,
        list_fn: Callable[..., Any],
        args: tuple[Any, ...],
        on_change: Callable[[Indexed], None] | None = None,
        *,
        indexers: Mapping[str, Indexer] | None = None,
        timeout: float = 30.0,
        watch_seconds: int = 240,
        on_object: Callable[[Obj, Obj | None, bool], None] | None = None,
        tell_list: bool = False,
        **kwargs: Any,
    ) -> None:
        self.name = name
        self._list_fn = list_fn
        self._args = args
        self._kwargs = kwargs
        self.store = Indexed(indexers)
        # The store after each change (for small lists whose readers derive facts from all of
        # it), and each object a watch event brings, after the store holds it (not those of a
        # list), with the version it replaced (None: added) and whether it was deleted.
        self._on_change = on_change
        self._on_object = on_object
        # The first list told object by object too (as added), before the store counts as
        # synced: for listeners that keep a view of their own of every object (the nodes).
        self._tell_list = tell_list
        self._timeout = timeout
        self._watch_seconds = watch_seconds
        self.synced = threading.Event()
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        run_forever(self.name, self._list_and_watch, self._stopped, self._failed)

    def _failed(self, exc: ApiException) -> None:
        if exc.status == 404:
            # The resource is not served (a CRD not installed): an empty list, for now.
            self.store.replace(())
            self._changed()
            self.synced.set()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self.store)

    def _list_and_watch(self) -> bool:
        """List, then watch from there until stopped or 410 Gone (True: list again at once) or
        another ERROR event (False: list again after a pause). 410 is the API server saying the
        version is older than its watch cache keeps (a restarted API server's, always): it
        answered, and every moment before the list is a moment the store is stale."""
        items, version = list_all(self._list_fn, self._args, self._timeout, **self._kwargs)
        listed = version
        first = not self.synced.is_set()
        before = {} if first else {key_of(o): o for o in self.store.values()}
        self.store.replace(items)
        self._changed()
        if self._on_object is not None and (self._tell_list or not first):
            self._tell_relist(before, items)
        self.synced.set()
        while not self._stopped.is_set():
            for event in self._watch(version):
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    log.info("watch restarts", watch=self.name, status=obj.get("code"),
                             reason=obj.get("reason"))
                    # Straight after a list, 410 again would list in a loop: a pause then.
                    return obj.get("code") == 410 and version != listed
                version = (obj.get("metadata") or {}).get("resourceVersion", version)
                if kind == "BOOKMARK":
                    continue
                deleted = kind == "DELETED"
                old = self.store.delete(obj) if deleted else self.store.upsert(obj)
                self._changed()
                if self._on_object is not None:
                    self._on_object(obj, old, deleted)
                if self._stopped.is_set():
                    return True
        return True

    def _tell_relist(self, before: Mapping[str, Obj], items: list[Obj]) -> None:
        """A list again (after 410 Gone, an ERROR, a broken watch): what changed in the gap told
        object by object, as events would have; what it no longer shows, as deleted (a
        deletion in the gap would otherwise stay in every listener's view for good)."""
        assert self._on_object is not None
        now = {key_of(o): o for o in items}
        for key, gone in before.items():
            if key not in now:
                self._on_object(gone, gone, True)
        for key, obj in now.items():
            old = before.get(key)
            if old is None or _version(old) != _version(obj):
                self._on_object(obj, old, False)

    def _watch(self, version: str) -> Iterator[Obj]:
        resp = open_watch(self._list_fn, self._args, version, self._watch_seconds, self._timeout,
                          **self._kwargs)
        try:
            for line in lines(resp.stream(amt=None, decode_content=False)):
                yield orjson.loads(line)
        finally:
            resp.release_conn()


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def list_all(list_fn: Callable[..., Any], args: tuple[Any, ...], timeout: float,
             **kwargs: Any) -> tuple[list[Obj], str]:
    """The whole list, a page of PAGE at a time (one consistent snapshot: the continue token
    keeps the first page's resourceVersion), and that resourceVersion."""
    items: list[Obj] = []
    version, token = "", None
    while True:
        paging: dict[str, Any] = {"limit": PAGE}
        if token:
            paging["_continue"] = token
        resp = list_fn(*args, _preload_content=False, _request_timeout=timeout, **kwargs,
                       **paging)
        listing = orjson.loads(resp.data)
        items.extend(listing.get("items") or [])
        meta = listing.get("metadata") or {}
        version = version or meta.get("resourceVersion", "")
        token = meta.get("continue")
        if not token:
            return items, version


def lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Newline-separated lines of a stream of chunks, as bytes (the kubernetes client's
    iter_resp_lines decodes each to str and copies its buffer after every line)."""
    pending: list[bytes] = []
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            pending.append(chunk[start:end])
            line = b"".join(pending)
            pending.clear()
            if line:
                yield line
            start = end + 1
        if start < len(chunk):
            pending.append(chunk[start:])
    if pending and (line := b"".join(pending)):
        yield line


def open_watch(list_fn: Callable[..., Any], args: tuple[Any, ...], version: str, seconds: int,
               timeout: float, **kwargs: Any) -> Any:
    """A watch request from `version` ("": the API server first sends every object as ADDED),
    bookmarks asked for, its answer left unread (a stream of lines)."""
    since = {"resource_version": version} if version else {}
    return list_fn(*args, watch=True, allow_watch_bookmarks=True, timeout_seconds=seconds,
                   _preload_content=False, _request_timeout=(timeout, seconds + 30), **since,
                   **kwargs)


def run_forever(name: str, once: Callable[[], bool], stopped: threading.Event,
                failed: Callable[[ApiException], None] = lambda _: None,
                clock: Callable[[], float] = time.monotonic) -> None:
    """`once()` again and again until stopped: at once after it returns True, after a pause
    (1 s, doubling to 30 s while it keeps failing) after it returns False or raises. A watch
    that ran HEALTHY seconds before it ended starts over from the shortest pause: the pause
    grows only while the watch keeps failing, not with every break in a process's life. While
    the API server cannot be reached at all (a restart: its port refuses), the pause stays at
    most UNREACHABLE_PAUSE: a refused connection costs it nothing, and a pause grown to 8 or
    16 s over a 15 s restart left every cache that stale after it (a replica not yet knowing
    the cluster cannot lead: seen in e2e as 10 s without a leader after a restart)."""
    backoff = 1.0
    while not stopped.is_set():
        began, unreachable = clock(), False
        try:
            if once():
                backoff = 1.0
                continue
        except ApiException as exc:
            failed(exc)
            log.warning("watch failed", watch=name, status=exc.status, reason=exc.reason)
            unreachable = errors.classify(exc).reason == "connection"  # status 0: no answer
        except Exception as exc:
            log.warning("watch failed", watch=name, error=repr(exc))
            unreachable = errors.classify(exc).reason == "connection"
        if clock() - began >= HEALTHY:
            backoff = 1.0
        stopped.wait(backoff)
        backoff = min(backoff * 2, UNREACHABLE_PAUSE if unreachable else 30.0)


def start_thread(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread
