"""Beside Tekton's affinity assistant (issue 48): with the assistant on, in any of its modes, the
runs of a namespace that opted in are anchored by tekton-coscheduler and every other namespace's
by Tekton's assistant alone, as without us. Real Tekton controller, scheduler and StatefulSet
controller; Tekton's feature flags switched for the scenario and put back after it."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.model.assistant import pinned_to_assistant
from controller.core.placement.gate import PLACEHOLDER_GATE
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle
from e2e.harness.cluster.tekton import SHIPPED_MODE
from e2e.harness.runs import Runs, assert_co_located, our_terms
from e2e.harness.tekton_runs import FAN_OUT, FETCH, PUBLISH, PodSeen

pytestmark = pytest.mark.e2e

ALL_TASKS = [FETCH, *FAN_OUT, PUBLISH]
# Each task 5 s: a run is in flight some 15 s, long enough to see both placeholders bound.
LASTING = {t: {tr.RUN_SECONDS: "5"} for t in ALL_TASKS}


def placeholders(runs: Runs, run: dict[str, Any]) -> list[PodSeen]:
    """The pods of Tekton's placeholders for the run, as the namespace's recorder saw them."""
    return [p for p in runs.recorder.all()
            if p.labels.get("app.kubernetes.io/component") == "affinity-assistant"
            and p.labels.get("tekton.dev/pipelineRun") == run["metadata"]["name"]]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "assistant_mode",
    # Tekton's defaults (`workspaces`) in the core subset every matrix cell runs.
    [pytest.param(SHIPPED_MODE, marks=pytest.mark.matrix), "pipelineruns", "isolate-pipelinerun"],
    indirect=True)
def test_with_the_assistant_on_opted_in_runs_are_ours_and_the_others_tekton_s(
    cluster: ClusterHandle, assistant_mode: str, runs: Runs, unlabelled: Runs
) -> None:
    """A run in an opted-in namespace and one in a namespace that did not, at once: ours gets a
    balloon, our term on every pod and the Anchored Event; theirs gets Tekton's placeholder,
    Tekton's term on every pod, and no object or term of ours. Both succeed on one node each."""
    runs.local_pvs_everywhere()  # cluster-wide: both runs' claims find a volume beside them
    ours = runs.start(tr.fan_out_fan_in(tr.unique("ours")))
    theirs = unlabelled.start(tr.fan_out_fan_in(tr.unique("theirs")))
    anchor = runs.anchor(ours)
    assert tr.outcome(runs.done(ours)) == ("True", "Succeeded")
    assert_co_located(runs, ours, anchor, ALL_TASKS)
    assert anchor in runs.said(ours, "Anchored").message
    assert tr.outcome(unlabelled.done(theirs)) == ("True", "Succeeded")
    pods = unlabelled.recorder.pods(theirs["metadata"]["uid"])
    assert sorted(p.task for p in pods) == sorted(ALL_TASKS)
    assert len({p.node for p in pods}) == 1, {p.name: p.node for p in pods}
    assert [p.name for p in pods if our_terms(p)] == []
    assert all(pinned_to_assistant(p.spec) for p in pods), [p.name for p in pods]
    assert unlabelled.balloons() == []
    # Tekton deletes its placeholders once the run is done: the recorders saw them meanwhile.
    their_placeholders = placeholders(unlabelled, theirs)
    assert their_placeholders, "Tekton made no placeholder for its run"
    assert all(p.gates == () for p in their_placeholders), [p.gates for p in their_placeholders]
    our_placeholders = placeholders(runs, ours)
    assert our_placeholders, "Tekton made no placeholder for our run"
    for p in our_placeholders:  # held by admission, given the anchor's node by the leader
        assert p.gates == (PLACEHOLDER_GATE,) and p.node == anchor, (p.name, p.gates, p.node)
        assert (p.spec.get("nodeSelector") or {}).get("kubernetes.io/hostname") == anchor


@pytest.mark.timeout(300)
@pytest.mark.parametrize("assistant_mode", ["isolate-pipelinerun"], indirect=True)
def test_isolated_placeholders_of_two_runs_that_fit_one_node_only_share_it(
    cluster: ClusterHandle, assistant_mode: str, runs: Runs, nodes: list[str]
) -> None:
    """`isolate-pipelinerun`: Tekton's placeholders require a node with no other placeholder.
    Two of our runs whose pod template allows one node only (Tekton copies it to their
    placeholders, the balloon inherits it) are both anchored there, and both placeholders are
    bound there while both runs are in flight: neither waits for the other's to go. Both
    succeed on that node."""
    only = nodes[1]
    runs.local_pvs_everywhere()
    template = {"nodeSelector": {"kubernetes.io/hostname": only}}
    made = [runs.start(tr.fan_out_fan_in(tr.unique(f"iso{i}"), pod_template=template,
                                         task_annotations=LASTING))
            for i in range(2)]
    assert [runs.anchor(run) for run in made] == [only, only]

    def both_bound() -> list[PodSeen] | None:
        held = [p for run in made for p in placeholders(runs, run)]
        return held if len(held) == 2 and all(p.node for p in held) else None

    held = cluster.wait_for(both_bound, timeout=60,
                            what="both runs' placeholders bound while both are in flight")
    ended = [run["metadata"]["name"] for run in made
             if tr.outcome(tr.get_run(runs.custom, runs.ns, run["metadata"]["name"]))]
    assert not ended, f"ended before both placeholders were bound (one waited): {ended}"
    for p in held:
        assert p.node == only and p.gates == (PLACEHOLDER_GATE,), (p.name, p.node, p.gates)
        assert p.spec.get("nodeSelector") == {"kubernetes.io/hostname": only}, p.spec
    for run in made:
        assert tr.outcome(runs.done(run)) == ("True", "Succeeded")
        assert_co_located(runs, run, only, ALL_TASKS)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("assistant_mode", ["workspaces"], indirect=True)
def test_a_task_binding_two_claims_is_refused_by_tekton_and_said_on_the_run(
    cluster: ClusterHandle, assistant_mode: str, runs: Runs
) -> None:
    """Tekton's own limit in its default mode, said, not hidden: Tekton fails the TaskRun that
    binds two claims (TaskRunValidationFailed, before any pod), and so the run; our Warning on
    the run names the task and Tekton's words."""
    runs.local_pvs_everywhere()
    tasks = [tr.task("both", workspaces=("src", "cache"))]
    run = runs.start(tr.pipelinerun(tr.unique("two"), tasks, {
        "src": tr.volume_claim_template(), "cache": tr.volume_claim_template()}))
    said = runs.said(run, "TektonRefusesTaskClaims")
    assert said.type == "Warning", said.type
    assert "task both binds" in said.message and "more than one PersistentVolumeClaim" in said.message
    done = runs.done(run)
    assert (tr.outcome(done) or ("", ""))[0] == "False", tr.outcome(done)
    [task_run] = tr.task_runs(runs.custom, runs.ns, run["metadata"]["uid"])
    condition = tr.succeeded_condition(task_run)
    assert condition.get("reason") == "TaskRunValidationFailed", condition
    assert "more than one PersistentVolumeClaim is bound" in str(condition.get("message")), condition
