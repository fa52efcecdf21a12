"""`explain`: what a person reads about one run."""

from __future__ import annotations

from typing import Any

from controller.core import explain
from controller.core.model.tekton import PipelineRun
from controller.core.placement import balloon, gate, warm
from controller.settings import Settings
from tests import factories


def sts() -> dict[str, Any]:
    run = PipelineRun.from_body(factories.pipelinerun())
    plan = balloon.plan(run, Settings().default_policy(), [], {"nodeSelector": {"pool": "ci"}})
    return plan.manifest


def balloon_pod(node: str) -> dict[str, Any]:
    return {"metadata": {"name": "coschedule-x-0"}, "spec": {"nodeName": node}}


def task_pod(name: str, node: str = "", message: str = "") -> dict[str, Any]:
    pod = factories.taskrun_pod(task=name)
    pod["spec"]["nodeName"] = node
    pod["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": balloon.selector_labels(factories.RUN_UID)},
         "topologyKey": "kubernetes.io/hostname"}]}}
    pod["status"] = {"phase": "Running" if node else "Pending"}
    if message:
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable", "message": message}]
    return pod


def node(name: str, unschedulable: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def test_the_report_names_the_anchor_why_each_pod_and_claim_and_the_problems() -> None:
    waiting = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod affinity rules."
    text = "\n".join(explain.report(explain.Observed(
        run=factories.pipelinerun(),
        namespace_enabled=True,
        balloon=sts(),
        balloon_pods=[balloon_pod("n1")],
        node=node("n1", unschedulable=True),
        pods=[task_pod("fetch", "n1"), task_pod("build", message=waiting)],
        pvcs={"source": {"spec": {"volumeName": "pv-1"}}},
        pvs={"pv-1": {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}}},
        events=[{"type": "Warning", "reason": "AnchorNodeUnavailable", "message": "it stays"}],
    )))
    assert "anchor: node n1" in text and "nodeSelector {'pool': 'ci'}" in text
    assert "node n1 is cordoned" in text
    assert "build-42-fetch-pod" in text and "build-42-build-pod" in text
    assert "pv-1" in text and "no (on that node only)" in text
    assert "pod build-42-build-pod waits" in text and "it needs cpu on node n1" in text
    assert "AnchorNodeUnavailable: it stays" in text


def test_a_run_that_is_not_there_says_so() -> None:
    assert explain.report(explain.Observed(None, True, None)) == ["run: not found"]


def test_a_namespace_that_did_not_opt_in_is_a_problem_with_its_remedy() -> None:
    text = "\n".join(explain.report(explain.Observed(factories.pipelinerun(), False, None)))
    assert "has not opted in" in text and "tekton-coscheduler.dev/enabled=true" in text


def test_a_pod_held_by_the_gate_says_so_and_one_held_past_its_anchor_is_a_problem() -> None:
    held = task_pod("build")
    held["spec"]["schedulingGates"] = [{"name": gate.GATE}]

    def text(balloon_pods: list[dict[str, Any]]) -> str:
        return "\n".join(explain.report(explain.Observed(
            run=factories.pipelinerun(), namespace_enabled=True,
            balloon=sts(), balloon_pods=balloon_pods, pods=[held])))

    waiting = text([])
    assert "gated until the anchor is bound" in waiting and "still gated" not in waiting
    assert "pod build-42-build-pod is still gated, its anchor bound" in text([balloon_pod("n1")])


def test_where_the_run_starts_fastest_is_read_from_the_balloon_and_the_anchor_s_node() -> None:
    run = PipelineRun.from_body(factories.pipelinerun())
    image = "docker.io/library/maven:3"
    found = warm.warmth(frozenset({image}), {image: {"n1": 800_000_000, "n2": 800_000_000}})
    made = balloon.plan(run, Settings().default_policy(), [], warmth=found).manifest
    anchor_node = node("n2")
    anchor_node["status"]["images"] = [{"names": [image], "sizeBytes": 800_000_000}]
    text = "\n".join(explain.report(explain.Observed(
        run=factories.pipelinerun(), namespace_enabled=True, balloon=made,
        balloon_pods=[balloon_pod("n2")], node=anchor_node)))
    assert ("where it starts fastest: 800.0 MB of the run's 800.0 MB of images already there"
            in text), text
    cold = "\n".join(explain.report(explain.Observed(
        run=factories.pipelinerun(), namespace_enabled=True, balloon=made,
        balloon_pods=[balloon_pod("n3")], node=node("n3"))))
    assert "none of the run's 800.0 MB of images reported there (most on n1" in cold, cold


def test_the_document_holds_what_the_text_says_in_a_stable_shape() -> None:
    """`-o json|yaml` prints this document; the text is rendered from it alone."""
    waiting = "0/2 nodes are available: 1 Insufficient cpu."
    observed = explain.Observed(
        run=factories.pipelinerun(), namespace_enabled=True, balloon=sts(),
        balloon_pods=[balloon_pod("n1")], node=node("n1", unschedulable=True),
        pods=[task_pod("fetch", "n1"), task_pod("build", message=waiting)],
        pvcs={"source": {"spec": {"volumeName": "pv-1"}}},
        pvs={"pv-1": {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}}},
        label="ci.example.com/coschedule", label_value="yes", label_source="from Deployment x/y")
    doc = explain.document(observed)
    assert explain.render(doc) == explain.report(observed)
    assert doc["namespace"] == {"name": "team-a", "optedIn": True,
                                "label": "ci.example.com/coschedule=yes",
                                "labelSource": "from Deployment x/y"}
    assert doc["anchor"] == {
        "node": "n1", "balloonPod": "coschedule-x-0", "waiting": None,
        "constraints": {"nodeSelector": {"pool": "ci"}, "requiredNodeAffinity": False,
                        "tolerations": 0, "claims": []},
        "warm": None, "nodeUnavailable": "cordoned"}
    assert doc["pods"] == [
        {"name": "build-42-build-pod", "task": "build", "node": None, "phase": "Pending",
         "tiedToBalloon": True, "gated": False},
        {"name": "build-42-fetch-pod", "task": "fetch", "node": "n1", "phase": "Running",
         "tiedToBalloon": True, "gated": False}]
    assert doc["claims"] == [{"name": "source", "missing": False, "volume": "pv-1",
                              "where": "kubernetes.io/hostname=n1", "mobility": "node-local"}]
    assert [p["problem"] for p in doc["problems"]] == [
        "the anchor's node is cordoned", f"pod build-42-build-pod waits: {waiting}"]
    assert doc["problems"][1]["whatToDo"] == "it needs cpu on node n1"


def test_the_advice_names_the_label_the_operator_is_configured_with() -> None:
    text = "\n".join(explain.report(explain.Observed(
        factories.pipelinerun(), False, None, label="ci.example.com/coschedule",
        label_value="yes", label_source="from Deployment ops/tcs")))
    assert "what to do: label it ci.example.com/coschedule=yes" in text
    assert "kubectl label namespace team-a ci.example.com/coschedule=yes" in text
    assert "tekton-coscheduler.dev/enabled" not in text


def test_a_task_tekton_refuses_in_workspaces_mode_is_a_problem_with_tekton_s_words() -> None:
    """Tekton's default mode (no feature-flags, or coschedule: workspaces) refuses a TaskRun that
    binds two claims (core/model/claimlimit.py): explain says it once, whatever our Event
    says; in the other modes, nothing."""
    body = factories.pipelinerun(workspaces=[
        {"name": "src", "persistentVolumeClaim": {"claimName": "source"}},
        {"name": "out", "persistentVolumeClaim": {"claimName": "results"}}])
    body["spec"]["pipelineSpec"] = {"tasks": [{"name": "build", "workspaces": [
        {"name": "src"}, {"name": "out"}]}]}
    event = {"type": "Warning", "reason": "TektonRefusesTaskClaims", "message": "the same"}
    for flags, said in ((None, True), ({"coschedule": "workspaces"}, True),
                        ({"coschedule": "pipelineruns"}, False), ({"coschedule": "disabled"}, False)):
        doc = explain.document(explain.Observed(run=body, namespace_enabled=True, balloon=None,
                                                events=[event] if said else [], tekton_flags=flags))
        problems = [p for p in doc["problems"] if "more than one PersistentVolumeClaim" in
                    str(p["problem"]) or p["problem"].startswith("TektonRefusesTaskClaims")]
        assert len(problems) == (1 if said else 0), flags
        if said:
            assert "task build binds results, source" in problems[0]["problem"]
            assert "bind one claim per task" in str(problems[0]["whatToDo"])
            assert "more than one PersistentVolumeClaim is bound" in "\n".join(
                explain.render(doc))
