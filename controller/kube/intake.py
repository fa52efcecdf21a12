"""One cluster-wide watch whose events are glanced at before they are decoded
(core/replica/glance.py).

The leader's PipelineRun and TaskRun-pod streams: every run of the cluster changes a dozen
times or more, and most are of namespaces that did not opt in. kopf decodes each event and
runs its per-object machinery before any filter of ours (about 35 of the 48 ms a run that was
not ours cost, py-spy in bench-scale); here an event nobody wants costs a few searches of its
bytes.

No store is kept: each wanted event is decoded and handed on, and of what was handed on only
what a deletion needs is remembered (`known`: names, labels, node). The watch starts without a
resourceVersion, so the API server first sends every object as ADDED (as a list would, but a
line at a time, each glanced at), then the changes; it resumes from the last version seen.
After 410 Gone or an ERROR event it lists again (a page at a time), hands on what the list
no longer shows of what was handed on as DELETED, then what it shows as ADDED, then watches from
the list's version: a pod deleted in the gap never stays in the pod index (a ghost would hold an
anchor in place, or give the next run on its claim a term towards a balloon that is gone).
Replayed events are harmless: every handler may be run again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import orjson
import structlog
from kubernetes.client.exceptions import ApiException

from controller.core.replica.glance import Glance, glance
from controller.kube.reflector import lines, list_all, open_watch, run_forever
from controller.metrics import Metrics

log = structlog.get_logger(__name__)

Obj = dict[str, Any]


class Intake:
    """`deliver(type, object)` for every event `wanted(glance)` keeps, in the watch's order."""

    def __init__(
        self,
        name: str,
        list_fn: Callable[..., Any],
        args: tuple[Any, ...],
        deliver: Callable[[str, Obj], None],
        wanted: Callable[[Glance], bool],
        *,
        markers: tuple[bytes, ...] = (),
        metrics: Metrics | None = None,
        timeout: float = 30.0,
        watch_seconds: int = 240,
        **kwargs: Any,
    ) -> None:
        self.name = name
        self._list_fn = list_fn
        self._args = args
        self._kwargs = kwargs
        self._deliver = deliver
        self._wanted = wanted
        self._markers = markers
        self._timeout = timeout
        self._watch_seconds = watch_seconds
        self._stopped = threading.Event()
        self.version = ""  # where the next watch resumes; "" to be sent everything again
        self._relist = False  # the version is too old: list before watching again
        self._expired = False  # the last ERROR was 410 Gone
        self.known: dict[str, Obj] = {}  # uid -> what a deletion of it needs, of those handed on
        counter = (metrics or Metrics()).watch_events
        self._counted = {True: counter.labels(watch=name, decoded="true"),
                         False: counter.labels(watch=name, decoded="false")}

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        run_forever(self.name, self.watch_once, self._stopped, self._failed)

    def _failed(self, exc: ApiException) -> None:
        if exc.status == 410:  # the version is too old: list again
            self._relist = True

    def watch_once(self) -> bool:
        """One watch request, to its end: the server's timeout or stop (True), or an ERROR
        event (False); after a list if the last ended on 410 Gone or an ERROR. A watch resumed
        from a version the API server no longer keeps (410: a restarted API server's fresh
        watch cache) is listed again at once (True): the server answered, only the version was
        old, and a pause there kept the caches stale seconds after the API server was back.
        The same right after a list is a failure like any other."""
        listed = self._relist
        if listed:
            self.relist()
        try:
            resp = open_watch(self._list_fn, self._args, self.version, self._watch_seconds,
                              self._timeout, **self._kwargs)
        except ApiException as exc:
            if exc.status != 410 or listed:
                raise
            self._relist = True  # the request itself refused as too old: the same, at once
            return True
        try:
            for line in lines(resp.stream(amt=None, decode_content=False)):
                if not self._take(line):
                    return self._expired and not listed
                if self._stopped.is_set():
                    break
        finally:
            resp.release_conn()
        return True

    def _take(self, line: bytes) -> bool:
        """Hands the event on if wanted; False when the watch must start again."""
        seen = glance(line, self._markers)
        wanted = self._wanted(seen)
        self._counted[wanted].inc()
        if not wanted:
            self.version = seen.version or self.version
            return True
        event = orjson.loads(line)
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":  # 410 Gone (the version is too old) and friends: list again
            log.info("watch restarts", watch=self.name, status=obj.get("code"),
                     reason=obj.get("reason"))
            self._relist, self._expired = True, obj.get("code") == 410
            return False
        self.version = (obj.get("metadata") or {}).get("resourceVersion") or self.version
        if kind != "BOOKMARK":
            self._hand_on(str(kind), obj)
        return True

    def relist(self) -> None:
        """Lists what the watch covers, hands on as DELETED what was handed on before and the
        list no longer shows, then what it shows as ADDED (glanced at first, as events are)."""
        items, version = list_all(self._list_fn, self._args, self._timeout, **self._kwargs)
        listed = {str((item.get("metadata") or {}).get("uid") or "") for item in items}
        # What vanished first: the handlers' queue serves in this order, and a run decided
        # while the rest is handed on must not meet a pod (a balloon, its claim) that is gone.
        gone = [obj for uid, obj in list(self.known.items()) if uid not in listed]
        for obj in gone:
            self._hand_on("DELETED", obj)
        for item in items:
            self._take(orjson.dumps({"type": "ADDED", "object": item}))
        log.info("watch listed again", watch=self.name, objects=len(items), gone=len(gone))
        self.version, self._relist = version, False

    def _hand_on(self, kind: str, obj: Obj) -> None:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if kind == "DELETED":
            self.known.pop(uid, None)
        elif uid:
            self.known[uid] = remembered(obj)
        self._deliver(kind, obj)


def remembered(obj: Obj) -> Obj:
    """What the handlers read of a deleted object (its names, labels, owners and node), kept
    for each object handed on: a tenth of a pod, or less."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "uid", "labels", "annotations",
                                 "ownerReferences") if k in meta}
    node = (obj.get("spec") or {}).get("nodeName")
    return {"metadata": kept, **({"spec": {"nodeName": node}} if node else {})}
