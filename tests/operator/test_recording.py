"""The recorder the scenarios' writes are held to (recording.py, conftest.py): what it records,
how it keys each write, and what counts as a difference."""

from __future__ import annotations

import copy
from typing import Any

from controller.core.basics import names
from controller.core.basics.notices import Notice
from controller.core.placement import balloon, budget
from controller.core.placement.runplan import reference
from controller.operator.executor import Notifier
from tests import apisurface, factories
from tests.operator import recording
from tests.operator.recording import Recorder

RUN = factories.RUN_UID
BALLOON = balloon.balloon_name(RUN)

# A call of each write with the arguments the operator gives it, and the key it is filed under.
CALLS: dict[str, tuple[dict[str, Any], str]] = {
    "create_statefulset": ({"manifest": {"metadata": {
        "name": "coschedule-x", "namespace": "team-a",
        "labels": {names.LABEL_RUN: "build-42", names.LABEL_RUN_UID: "x"}}}},
        "PipelineRun team-a/build-42"),
    "replace_balloon_template": ({"manifest": {
        "metadata": {"name": BALLOON, "namespace": "team-a"}, "spec": {"template": {}}}},
        "PipelineRun team-a/build-42"),
    "annotate_statefulset": ({"namespace": "team-a", "name": BALLOON, "annotations": {}},
                             "PipelineRun team-a/build-42"),
    "delete_statefulset": ({"namespace": "team-a", "name": BALLOON, "uid": "s"},
                           "PipelineRun team-a/build-42"),
    "create_pod": ({"manifest": {"metadata": {"name": f"{BALLOON}-room-0",
                                              "namespace": "team-a"}}},
                   "PipelineRun team-a/build-42"),
    "delete_pod": ({"namespace": "team-a", "name": f"{BALLOON}-0", "uid": "p"},
                   "PipelineRun team-a/build-42"),
    "release_pod_gate": ({"namespace": "team-a", "name": "unknown-pod", "uid": "p",
                          "patch": {}}, "Pod team-a/unknown-pod"),
    "create_pdb": ({"manifest": budget.of_namespace("team-a")}, "Namespace team-a"),
    "delete_pdb": ({"namespace": "team-a", "name": budget.NAME, "uid": "b"}, "Namespace team-a"),
    "patch_tekton": ({"namespace": "team-a", "plural": "taskruns", "name": "build-42-fetch",
                      "patch": {"metadata": {"labels": {names.LABEL_ANCHORED: RUN}}}},
                     "PipelineRun team-a/build-42"),
    "patch_policy_status": ({"namespace": "team-a", "name": "p", "status": {}},
                            "CoschedulingPolicy team-a/p"),
    "create_lease": ({"body": {"metadata": {"name": "l", "namespace": "tcs"}}}, "-"),
    "replace_lease": ({"body": {"metadata": {"name": "l", "namespace": "tcs"}}}, "-"),
    "post_event": ({"involved": reference("late", "team-b", "late-uid"), "reason": "R",
                    "message": "m", "warning": True}, "PipelineRun team-b/late"),
    "create_binding": ({"body": {"metadata": {"name": "b"}}}, "-"),
    "replace_binding": ({"body": {"metadata": {"name": "b"}}, "resource_version": "7"}, "-"),
    "delete_binding": ({"name": "b"}, "-"),
}


def test_every_write_of_the_clients_is_described_and_keyed() -> None:
    assert set(CALLS) == set(apisurface.WRITES)
    recorder = Recorder()
    for method, (kwargs, _) in CALLS.items():
        recorder.note(method, (), kwargs)
    records = recorder.records()
    assert [r["key"] for r in records] == [key for _, key in CALLS.values()]
    assert [r["verb"] for r in records] == [apisurface.WRITES[m][0] for m in CALLS]


def test_a_write_that_names_only_the_run_s_uid_is_keyed_by_the_run_the_scenario_made() -> None:
    recorder = Recorder()
    recorder.learn_run("team-b", "nightly", "nightly-uid")
    recorder.note("delete_pod", ("team-b", f"{balloon.balloon_name('nightly-uid')}-0", "p"), {})
    recorder.note("delete_pod", ("team-b", f"{balloon.balloon_name('stray-uid')}-0", "p"), {})
    assert [r["key"] for r in recorder.records()] == [
        "PipelineRun team-b/nightly", "Pod team-b/coschedule-stray-uid-0"]


def test_volatile_values_are_masked_and_fixed_uids_kept() -> None:
    pod = factories.taskrun_pod()
    body = recording.normalised({**pod, "metadata": {**pod["metadata"], "resourceVersion": "9",
                                                     "creationTimestamp": "2026-11-28T10:00:00Z"}})
    meta = body["metadata"]
    assert meta["resourceVersion"] == meta["creationTimestamp"] == "<masked>"
    assert meta["labels"]["tekton.dev/taskRunUID"] == "<uuid>"
    assert meta["ownerReferences"][0]["uid"] == "<uuid>"
    assert meta["labels"]["tekton.dev/pipelineRunUID"] == RUN
    assert recording.normalised({"a": "made at 2026-11-28T10:00:00.123+00:00"}) == {
        "a": "made at <time>"}
    recorder = Recorder()
    recorder.note("post_event", (reference("r", "ns", "u"), "R", "no pod in 61s; 4 nodes"),
                  {"warning": True})
    assert recorder.records()[0]["body"]["message"] == "no pod in <n>s; 4 nodes"


class Events:
    """A stand-in client, found and recorded as the scenarios' are."""

    def __init__(self) -> None:
        self.posted: list[str] = []

    def post_event(self, involved: Any, reason: str, message: str, *, warning: bool) -> None:
        self.posted.append(reason)


def test_only_what_the_operator_asks_is_recorded_not_what_a_test_sets_up(
    writes_recorded: Recorder,
) -> None:
    events = Events()
    events.post_event(reference("r", "ns", "u"), "SetUp", "by the test", warning=False)
    Notifier(events).tell(reference("r", "ns", "u"), Notice("Anchored", "n1"), "u")  # type: ignore[arg-type]
    assert events.posted == ["SetUp", "Anchored"]
    assert [(r["verb"], r["body"]["reason"]) for r in writes_recorded.records()] == [
        ("event", "Anchored")]


class Unreachable:
    def post_event(self, involved: Any, reason: str, message: str, *, warning: bool) -> None:
        raise factories.api_error(503, "etcd leader changed")


def test_a_write_refused_is_recorded_with_the_error(writes_recorded: Recorder) -> None:
    Notifier(Unreachable()).tell(reference("r", "ns", "u"), Notice("Anchored", "n1"), "u")  # type: ignore[arg-type]
    [refused] = writes_recorded.records()
    assert refused["raised"] == "ApiException 503"


def record(key: str, name: str, verb: str = "create") -> dict[str, Any]:
    return {"key": key, "verb": verb, "kind": "Pod", "namespace": "ns", "name": name, "body": {}}


def test_only_the_order_within_a_key_counts() -> None:
    recorded = [record("A", "a1"), record("B", "b1"), record("A", "a2")]
    assert recording.difference(recorded, [record("B", "b1"), record("A", "a1"),
                                           record("A", "a2")]) == ""
    swapped = recording.difference(recorded, [record("A", "a2"), record("B", "b1"),
                                              record("A", "a1")])
    assert "key A" in swapped and "key B" not in swapped
    changed = copy.deepcopy(recorded)
    changed[1]["verb"] = "delete"
    assert "key B" in recording.difference(recorded, changed)
    assert "key C: 0 writes recorded, 1 now" in recording.difference(
        recorded, [*recorded, record("C", "c1")])
