"""Pods that wait for a node: nothing said within the grace period, then the scheduler's words
and what would free the pod."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.core.placement import waiting
from controller.core.placement.waiting import Waiting

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
CPU = "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't match pod affinity rules."


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (CPU, "cpu"),
        ("0/4 nodes are available: 1 Too many pods, 3 node(s) didn't match pod affinity rules.", "pods"),
        ("0/2 nodes are available: 1 node(s) had untolerated taint {ci: }, 1 node(s) didn't match pod affinity rules.", "taint"),
        ("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.", "node-selector"),
        ('0/3 nodes are available: persistentvolumeclaim "ws" not found.', "claim"),
        ("0/3 nodes are available: 3 node(s) didn't match pod affinity rules.", "anchor"),
        ("something new", "other"),
    ],
)
def test_the_schedulers_words_give_a_reason(message: str, reason: str) -> None:
    assert waiting.reason_of(message) == reason


def test_nothing_is_said_within_the_grace_period() -> None:
    pod = Waiting("build-a-pod", NOW - timedelta(seconds=10), CPU, anchor="n1")
    assert waiting.notice(pod, NOW, grace=15) is None


def test_a_task_pod_that_cannot_follow_its_anchor_is_a_warning_with_the_schedulers_words() -> None:
    pod = Waiting("build-a-pod", NOW - timedelta(seconds=16), CPU, anchor="n1")
    notice = waiting.notice(pod, NOW, grace=15)
    assert notice is not None and notice.warning and notice.reason == "PodCannotFollowAnchor"
    assert CPU in notice.message and "node n1" in notice.message and "CPU freed" in notice.message


def test_a_balloon_that_waits_too_long_is_a_warning() -> None:
    pod = Waiting("coschedule-x-0", NOW - timedelta(seconds=21), "0/4 nodes are available: 4 Insufficient memory.", balloon=True)
    notice = waiting.notice(pod, NOW, grace=20)
    assert notice is not None and notice.reason == "BalloonUnschedulable" and "21s" in notice.message


def test_a_pod_pinned_to_tekton_s_assistant_is_said_with_what_to_do() -> None:
    pod = Waiting("build-a-pod", NOW - timedelta(seconds=16),
                  "0/4 nodes are available: 4 node(s) didn't match pod affinity rules.",
                  assistant="affinity-assistant-0123456789")
    notice = waiting.notice(pod, NOW, grace=15)
    assert notice is not None and notice.warning and notice.reason == "PodWaitsForTektonAssistant"
    assert "affinity-assistant-0123456789" in notice.message and "16s" in notice.message
    assert "cancel the run" in notice.message


NOT_FOUND = '0/4 nodes are available: persistentvolumeclaim "shared-0123456789" not found. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.'


def test_a_balloon_waiting_for_a_claim_tekton_makes_is_never_a_warning() -> None:
    """Tekton makes a run's volumeClaimTemplate claims before its first TaskRun: the balloon
    waits for Tekton, no pod of the run waits for it, at any grace and under any load."""
    pod = Waiting("coschedule-x-0", NOW - timedelta(hours=1), NOT_FOUND, balloon=True)
    assert waiting.missing_claim(NOT_FOUND) == "shared-0123456789"
    assert waiting.notice(pod, NOW, grace=5, tekton_makes={"shared-0123456789"}) is None


def test_a_balloon_waiting_for_a_claim_nobody_makes_is_a_warning_after_the_grace() -> None:
    """A persistentVolumeClaim workspace naming a claim that does not exist: only a person can
    make it."""
    pod = Waiting("coschedule-x-0", NOW - timedelta(seconds=21), NOT_FOUND, balloon=True)
    notice = waiting.notice(pod, NOW, grace=20, tekton_makes={"other-0123456789"})
    assert notice is not None and notice.warning and "shared-0123456789" in notice.message


def test_a_balloon_without_a_pod_is_said_with_the_controller_s_failure_or_after_its_silence() -> None:
    assert waiting.no_pod(4, 5, ["exceeded quota"]) is None
    said = waiting.no_pod(6, 5, ["first", "exceeded quota: q"])
    assert said is not None and said.warning and "exceeded quota: q" in said.message
    assert waiting.no_pod(59, 5, []) is None  # a busy controller, in a burst
    silent = waiting.no_pod(61, 5, [])
    assert silent is not None and "kube-controller-manager" in silent.message
    # making the others' pods of a burst, 40 s ago the last: at work, behind
    assert waiting.no_pod(61, 5, [], controller_idle=40) is None
    assert waiting.no_pod(61, 5, [], controller_idle=61) is not None


def test_a_pod_taking_its_turn_after_its_run_s_own_pods_is_not_a_warning() -> None:
    """A layer wider than its node: the run's running pods hold the CPU the next one waits
    for, and its turn comes as they end. Once they hold none, the wait is said."""
    pod = Waiting("build-h-pod", NOW - timedelta(seconds=60), CPU, anchor="n1")
    assert waiting.notice(pod, NOW, grace=15, run_holds={"cpu", "pods"}) is None
    assert waiting.notice(pod, NOW, grace=15, run_holds={"memory"}) is not None
    assert waiting.notice(pod, NOW, grace=15) is not None
