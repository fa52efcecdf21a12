"""Kubernetes Events for the people who own the runs, each said once."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

import structlog

from controller.core.basics.notices import Notice
from controller.core.model import tekton
from controller.kube.client import Kube

log = structlog.get_logger(__name__)


def pipelinerun_ref(name: str, namespace: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{tekton.GROUP}/{tekton.VERSION}",
        "kind": tekton.PIPELINE_RUN_KIND,
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
    }


class Notifier:
    """Posts an Event per (key, reason) once per process: replays and resyncs say nothing new.

    After a restart a standing problem is said once more, which is what an operator of the
    cluster wants to see in `kubectl describe` anyway.
    """

    def __init__(self, kube: Kube, remember: int = 20_000) -> None:
        self._kube = kube
        self._said: OrderedDict[Hashable, None] = OrderedDict()
        self._remember = remember

    def tell(self, involved: Mapping[str, Any], notice: Notice, key: Hashable) -> None:
        meta = involved.get("metadata") or {}
        marker = (key, notice.reason)
        if marker in self._said:
            return
        bound = log.bind(
            object=f"{involved.get('kind')}/{meta.get('namespace')}/{meta.get('name')}"
        )
        (bound.warning if notice.warning else bound.info)(notice.message, reason=notice.reason)
        try:
            self._kube.post_event(involved, notice.reason, notice.message, warning=notice.warning)
        except Exception as exc:
            bound.warning("could not post event", reason=notice.reason, error=repr(exc))
            return
        self._said[marker] = None
        while len(self._said) > self._remember:
            self._said.popitem(last=False)

    def forget(self, key: Hashable, reason: str) -> None:
        self._said.pop((key, reason), None)
