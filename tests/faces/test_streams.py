"""The streams' queue hands the resync's look at a run back with the very body it was given:
a look at a live run checks by identity that no newer event replaced it (Operator.look)."""

from __future__ import annotations

import threading
from typing import Any

import kubernetes

from controller.faces.streams import Streams
from controller.kube.client import Kube


class Operator:
    def __init__(self) -> None:
        self.submit: Any = None
        self.looked: list[tuple[Any, bool]] = []
        self.done = threading.Event()

    def may_concern(self, seen: Any) -> bool:
        return True

    def look(self, body: Any, listed: bool = False) -> None:
        self.looked.append((body, listed))
        self.done.set()


def test_a_resync_s_look_reaches_the_operator_with_the_body_itself() -> None:
    operator = Operator()
    streams = Streams(operator, Kube(kubernetes.client.ApiClient()), 1.0,  # type: ignore[arg-type]
                      workers=1)
    assert operator.submit == streams.submit_run  # Operator.nudge puts looks on this queue
    body = {"metadata": {"uid": "run-uid", "name": "build", "namespace": "team-a"}}
    streams.work.start()
    streams.submit_run("run-uid", body, False)
    assert operator.done.wait(5)
    streams.work.stop()
    [(seen, listed)] = operator.looked
    assert seen is body and listed is False
