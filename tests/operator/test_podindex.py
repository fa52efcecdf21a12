"""What the pod watch has told the leader, read by claim: a run's decision sees only the other
runs whose balloons mount its claims, however many runs the namespace holds."""

from __future__ import annotations

from typing import Any

from controller.core import balloon, names
from controller.operator.podindex import PodIndex


def balloon_pod(run_uid: str, claims: list[str], ns: str = "team") -> dict[str, Any]:
    return {"metadata": {"name": f"{balloon.balloon_name(run_uid)}-0", "namespace": ns,
                         "uid": f"pod-{run_uid}",
                         "labels": {**balloon.selector_labels(run_uid), names.LABEL_RUN: "r"}},
            "spec": {"nodeName": "n1", "volumes": [
                {"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]},
            "status": {}}


def test_only_the_runs_whose_balloons_mount_the_run_s_claims_are_its_others() -> None:
    index = PodIndex()
    for i in range(1000):
        index.balloon_event(balloon_pod(f"crowd-{i}", [f"own-{i}"]), deleted=False)
    index.balloon_event(balloon_pod("sharer", ["cache", "own-sharer"]), deleted=False)
    index.balloon_event(balloon_pod("far", ["cache"], ns="elsewhere"), deleted=False)
    index.balloon_event(balloon_pod("me", ["cache", "ws"]), deleted=False)
    assert index.mounted_claims("team", "me", ["cache", "ws"]) == {
        "sharer": ("cache", "own-sharer")}

    index.balloon_event(balloon_pod("sharer", ["cache", "own-sharer"]), deleted=True)
    assert index.mounted_claims("team", "me", ["cache", "ws"]) == {}
    index.balloon_event(balloon_pod("again", ["ws"]), deleted=False)
    index.forget("again")
    assert index.mounted_claims("team", "me", ["cache", "ws"]) == {}
    assert index.mounted_claims("elsewhere", "me", ["cache"]) == {"far": ("cache",)}


def test_a_balloon_that_mounts_other_claims_after_an_update_is_refiled() -> None:
    index = PodIndex()
    index.balloon_event(balloon_pod("other", ["a"]), deleted=False)
    index.balloon_event(balloon_pod("other", ["b"]), deleted=False)
    assert index.mounted_claims("team", "me", ["a"]) == {}
    assert index.mounted_claims("team", "me", ["b"]) == {"other": ("b",)}
