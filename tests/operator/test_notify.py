from __future__ import annotations

from typing import Any

from controller.core.basics.notices import Notice
from controller.core.placement.runplan import reference
from controller.operator.executor import Notifier


class RecordingKube:
    def __init__(self, fail: int = 0) -> None:
        self.posted: list[tuple[str, str]] = []
        self.fail = fail

    def post_event(self, involved: Any, reason: str, message: str, *, warning: bool) -> None:
        if self.fail:
            self.fail -= 1
            raise OSError("API server unreachable")
        self.posted.append((involved["metadata"]["name"], reason))


def test_each_notice_is_said_once_per_key() -> None:
    kube = RecordingKube()
    notifier = Notifier(kube)  # type: ignore[arg-type]
    ref = reference("build", "team-a", "uid-1")
    for _ in range(3):
        notifier.tell(ref, Notice("BalloonNotPlaced", "no node"), "uid-1")
    notifier.tell(ref, Notice("Anchored", "node-1", warning=False), "uid-1")
    assert kube.posted == [("build", "BalloonNotPlaced"), ("build", "Anchored")]


def test_a_failed_post_is_tried_again_next_time() -> None:
    kube = RecordingKube(fail=1)
    notifier = Notifier(kube)  # type: ignore[arg-type]
    ref = reference("build", "team-a", "uid-1")
    notifier.tell(ref, Notice("BalloonCreateFailed", "403"), "uid-1")
    notifier.tell(ref, Notice("BalloonCreateFailed", "403"), "uid-1")
    assert kube.posted == [("build", "BalloonCreateFailed")]


def test_memory_is_bounded() -> None:
    kube = RecordingKube()
    notifier = Notifier(kube, remember=10)  # type: ignore[arg-type]
    ref = reference("build", "team-a", "uid")
    for i in range(50):
        notifier.tell(ref, Notice("Anchored", "x", warning=False), i)
    assert len(notifier._said) == 10
