"""The webhook's decision, as a pure function of the request and what the cluster view knows."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest

from controller.core.admission import admission
from controller.core.admission.admission import Outcome
from controller.core.basics import names
from controller.core.placement import gate
from tests import factories
from tests.conftest import StaticFacts


def decide(obj: dict[str, Any], facts: StaticFacts, **kw: Any) -> admission.Decision:
    _, request = admission.parse(json.dumps(factories.admission_review(obj, **kw)).encode())
    return admission.decide(request, facts)


def test_taskrun_pod_of_enabled_namespace_gets_the_term(facts: StaticFacts) -> None:
    pod = factories.taskrun_pod()
    decision = decide(pod, facts)
    assert decision.outcome is Outcome.PATCHED
    patched = jsonpatch.apply_patch(pod, list(decision.patch))
    term = patched["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"]["matchLabels"][names.LABEL_RUN_UID] == factories.RUN_UID


def test_topology_key_comes_from_the_namespace_policy(facts: StaticFacts) -> None:
    facts.keys["team-a"] = "topology.kubernetes.io/zone"
    decision = decide(factories.taskrun_pod(), facts)
    assert decision.patch[0]["value"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "topologyKey"
    ] == "topology.kubernetes.io/zone"


@pytest.mark.parametrize(
    ("mutate", "outcome"),
    [
        (lambda p, f: p.update(metadata={**p["metadata"], "namespace": "other"}), Outcome.NAMESPACE_DISABLED),
        (lambda p, f: p["metadata"]["annotations"].update({names.OPT_OUT_ANNOTATION: "false"}), Outcome.OPTED_OUT),
        (lambda p, f: setattr(f, "synced", False), Outcome.NOT_SYNCED),
        (lambda p, f: p["metadata"]["labels"].pop("tekton.dev/taskRun"), Outcome.NOT_TASKRUN_POD),
        (lambda p, f: p["metadata"].pop("labels"), Outcome.NOT_TASKRUN_POD),
        (lambda p, f: p["metadata"]["labels"].update({names.LABEL_MANAGED_BY: names.APP}), Outcome.NOT_TASKRUN_POD),
        # Another namespace's pod pinned by Tekton's assistant: Tekton's alone.
        (lambda p, f: p.update(metadata={**p["metadata"], "namespace": "other"}, spec={
            **p["spec"], "affinity": {"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [factories.TEKTON_ASSISTANT_TERM]}}}),
         Outcome.NAMESPACE_DISABLED),
    ],
    ids=["other-namespace", "opted-out", "not-synced", "standalone-or-other",
         "no-labels", "balloon-pod", "other-namespace-pinned-by-tekton"],
)
def test_pods_left_alone(mutate: Any, outcome: Outcome, facts: StaticFacts) -> None:
    pod = factories.taskrun_pod()
    mutate(pod, facts)
    review = factories.admission_review(pod)
    review["request"]["namespace"] = pod["metadata"]["namespace"]
    decision = admission.decide(review["request"], facts)
    assert decision.outcome is outcome
    assert decision.patch == ()


def anchored_pod(namespace: str = "other", key: str | None = None) -> dict[str, Any]:
    """A pod of a run the operator marked (its balloon exists), in a namespace since switched
    off unless given."""
    pod = factories.taskrun_pod()
    pod["metadata"]["namespace"] = namespace
    pod["metadata"]["labels"][names.LABEL_ANCHORED] = factories.RUN_UID
    if key is not None:
        pod["metadata"]["annotations"][names.ANNOTATION_TOPOLOGY_KEY] = key
    return pod


def decide_in(pod: dict[str, Any], facts: StaticFacts) -> admission.Decision:
    review = factories.admission_review(pod)
    review["request"]["namespace"] = pod["metadata"]["namespace"]
    return admission.decide(review["request"], facts)


def term_of(pod: dict[str, Any], decision: admission.Decision) -> dict[str, Any]:
    patched = jsonpatch.apply_patch(pod, list(decision.patch))
    terms = patched["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert len(terms) == 1
    return dict(terms[0])


def test_a_pod_of_an_anchored_run_keeps_its_term_after_its_namespace_is_switched_off(facts: StaticFacts) -> None:
    pod = anchored_pod(key="kubernetes.io/hostname")
    decision = decide_in(pod, facts)
    assert decision.outcome is Outcome.PATCHED
    assert term_of(pod, decision)["labelSelector"]["matchLabels"][names.LABEL_RUN_UID] == factories.RUN_UID


def test_a_pod_of_an_anchored_run_keeps_its_term_after_the_run_opts_out(facts: StaticFacts) -> None:
    pod = anchored_pod("team-a")
    pod["metadata"]["annotations"][names.OPT_OUT_ANNOTATION] = "false"
    assert decide_in(pod, facts).outcome is Outcome.PATCHED


def test_a_pod_of_an_anchored_run_keeps_the_key_it_was_anchored_with(facts: StaticFacts) -> None:
    """The namespace's policy changed to a zone key after the run was anchored by hostname."""
    facts.keys["team-a"] = "topology.kubernetes.io/zone"
    pod = anchored_pod("team-a", key="kubernetes.io/hostname")
    assert term_of(pod, decide_in(pod, facts))["topologyKey"] == "kubernetes.io/hostname"
    bad = anchored_pod("team-a", key="not a key/")
    assert term_of(bad, decide_in(bad, facts))["topologyKey"] == "topology.kubernetes.io/zone"


def test_a_mark_copied_from_another_run_is_not_taken_for_an_anchor(facts: StaticFacts) -> None:
    """A run made from another's manifest carries that run's UID in our label."""
    pod = anchored_pod()
    pod["metadata"]["labels"][names.LABEL_ANCHORED] = "another-runs-uid"
    assert decide_in(pod, facts).outcome is Outcome.NAMESPACE_DISABLED


def test_standalone_taskrun_pod_is_untouched(facts: StaticFacts) -> None:
    pod = factories.taskrun_pod()
    for key in ("tekton.dev/pipelineRun", "tekton.dev/pipelineRunUID", "tekton.dev/pipelineTask"):
        pod["metadata"]["labels"].pop(key)
    assert decide(pod, facts).outcome is Outcome.NOT_TASKRUN_POD


def test_reinvoked_webhook_adds_no_second_term(facts: StaticFacts) -> None:
    pod = factories.taskrun_pod()
    first = decide(pod, facts)
    patched = jsonpatch.apply_patch(pod, list(first.patch))
    second = decide(patched, facts)
    assert second.outcome is Outcome.ALREADY and second.patch == ()


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT"])
def test_only_create_is_mutated(operation: str, facts: StaticFacts) -> None:
    assert decide(factories.taskrun_pod(), facts, operation=operation).outcome is Outcome.NOT_POD_CREATE


def test_wrong_kind_is_allowed_unpatched(facts: StaticFacts) -> None:
    assert decide(factories.taskrun_pod(), facts, kind="Deployment", group="apps").outcome is Outcome.NOT_POD_CREATE


def test_response_is_admission_review_v1_with_base64_jsonpatch(facts: StaticFacts) -> None:
    decision = decide(factories.taskrun_pod(), facts)
    answer = admission.response("req-1", decision)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == "req-1" and answer["response"]["allowed"] is True
    assert answer["response"]["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(answer["response"]["patch"])) == list(decision.patch)
    unpatched = admission.response("req-2", admission.Decision(Outcome.NOT_TASKRUN_POD))
    assert unpatched["response"] == {"uid": "req-2", "allowed": True}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps({"kind": "Pod"}).encode(), "kind is 'Pod'"),
        (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1"}).encode(), "apiVersion"),
        (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}).encode(), "request is missing"),
        (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}).encode(),
         "request.uid"),
    ],
)
def test_malformed_reviews_are_named(body: bytes, message: str) -> None:
    with pytest.raises(admission.MalformedReview, match=message):
        admission.parse(body)


@pytest.mark.parametrize(
    "obj",
    [None, "pod", [], {"metadata": "x"}, {"metadata": {"labels": ["a"]}}, {"spec": None, "metadata": {}}],
)
def test_garbage_objects_are_allowed_unpatched(obj: Any, facts: StaticFacts) -> None:
    review = factories.admission_review({"metadata": {"namespace": "team-a"}})
    review["request"]["object"] = obj
    decision = admission.decide(review["request"], facts)
    assert decision.patch == ()


def test_pod_with_spec_garbage_but_valid_labels_still_answers(facts: StaticFacts) -> None:
    pod = factories.taskrun_pod()
    pod["spec"] = {"affinity": "not-an-object"}
    decision = decide(pod, facts)
    assert decision.outcome is Outcome.PATCHED
    assert decision.patch[0]["path"] == "/spec/affinity"


@pytest.mark.parametrize("spec", [None, "x", []])
def test_pod_whose_spec_is_not_an_object_is_left_alone(spec: Any, facts: StaticFacts) -> None:
    """Found by the fuzzer: a patch to /spec/affinity cannot apply where spec is not an object.
    The API server never sends such a pod, but an answer must never carry a patch that fails."""
    pod = factories.taskrun_pod()
    pod["spec"] = spec
    decision = decide(pod, facts)
    assert decision.outcome is Outcome.INVALID_OBJECT and decision.patch == ()


@pytest.mark.parametrize(("key", "valid"), [
    ("kubernetes.io/hostname", True), ("zone", True), ("/zone", False), ("a/b/c", False),
    ("example.com/" + "z" * 63, True), ("example.com/" + "z" * 64, False),
    ("x" * 254 + "/zone", False), ("Example.com/zone", False), ("", False),
])
def test_a_topology_key_is_a_label_key_as_the_api_server_checks_it(key: str, valid: bool) -> None:
    from controller.core.basics.fragments import is_qualified_name

    assert is_qualified_name(key) is valid


def gated_in(pod: dict[str, Any], facts: StaticFacts) -> tuple[admission.Decision, dict[str, Any]]:
    review = factories.admission_review(pod)
    review["request"]["namespace"] = pod["metadata"]["namespace"]
    decision = admission.decide(review["request"], facts, gate_first_pods=True)
    return decision, jsonpatch.apply_patch(pod, list(decision.patch))


def test_a_first_pod_of_a_run_waits_behind_the_gate_until_its_anchor_is_bound(facts: StaticFacts) -> None:
    decision, patched = gated_in(factories.taskrun_pod(), facts)
    assert decision.outcome is Outcome.PATCHED and decision.gated
    assert patched["spec"]["schedulingGates"] == [{"name": gate.GATE}]
    assert gate.held(patched["spec"])
    assert patched["metadata"]["labels"][names.LABEL_TIED] == "true"  # the leader watches it


def test_the_gate_joins_the_gates_a_pod_already_has(facts: StaticFacts) -> None:
    pod = factories.taskrun_pod()
    pod["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    _, patched = gated_in(pod, facts)
    assert patched["spec"]["schedulingGates"] == [{"name": "example.com/quota"}, {"name": gate.GATE}]
    again, _ = gated_in(patched, facts)  # a reinvocation: neither a second term nor gate
    assert again.outcome is Outcome.ALREADY and again.patch == ()
    assert gate.add(patched["spec"]) == []


def test_a_pod_of_a_marked_run_is_not_gated(facts: StaticFacts) -> None:
    """The mark is written once the balloon exists: the run's later pods are made beside it."""
    decision, patched = gated_in(anchored_pod("team-a"), facts)
    assert decision.outcome is Outcome.PATCHED and not decision.gated
    assert "schedulingGates" not in patched["spec"]
    assert names.LABEL_TIED not in patched["metadata"]["labels"]  # the mark is what it is seen by


def test_a_pod_that_does_not_name_its_run_s_uid_is_not_gated(facts: StaticFacts) -> None:
    """The leader finds the pods it releases by the run's uid: one without it would wait for ever."""
    decision, patched = gated_in(factories.taskrun_pod(run_uid=None), facts)
    assert decision.outcome is Outcome.PATCHED and not decision.gated
    assert "schedulingGates" not in patched["spec"]


def test_a_pod_left_alone_is_not_gated_either(facts: StaticFacts) -> None:
    pod = factories.taskrun_pod(namespace="other")
    decision, _ = gated_in(pod, facts)
    assert decision.outcome is Outcome.NAMESPACE_DISABLED and decision.patch == ()


def test_the_release_removes_only_our_gate_by_name() -> None:
    assert gate.release() == {"spec": {"schedulingGates": [{"name": gate.GATE, "$patch": "delete"}]}}


# -- beside Tekton's assistant (core/model/assistant.py) -----------------------------------------


def pinned_pod(namespace: str = "team-a", *users: dict[str, Any]) -> dict[str, Any]:
    """A TaskRun pod as Tekton makes it with its assistant on: its term appended to the user's."""
    pod = factories.taskrun_pod(namespace=namespace)
    pod["spec"]["affinity"] = {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [*users, factories.TEKTON_ASSISTANT_TERM]}}
    return pod


def test_in_an_opted_in_namespace_our_term_stands_in_place_of_tekton_s(facts: StaticFacts) -> None:
    """The scheduler wants ONE pod matching every required term of a pod, and no pod is both
    Tekton's placeholder and our balloon: its term goes, ours comes, the user's stay."""
    users = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}
    pod = pinned_pod("team-a", users)
    decision, patched = gated_in(pod, facts)
    assert decision.outcome is Outcome.PATCHED and decision.gated
    terms = patched["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0] == users and len(terms) == 2
    assert terms[1]["labelSelector"]["matchLabels"][names.LABEL_RUN_UID] == factories.RUN_UID
    again, _ = gated_in(patched, facts)  # reinvoked: nothing more
    assert again.outcome is Outcome.ALREADY and again.patch == ()


def test_a_pod_pinned_by_tekton_alone_gets_our_term_in_its_place(facts: StaticFacts) -> None:
    pod = pinned_pod()
    patched = jsonpatch.apply_patch(pod, list(decide_in(pod, facts).patch))
    terms = patched["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [t["labelSelector"]["matchLabels"].get(names.LABEL_COMPONENT) for t in terms] == [
        names.COMPONENT_BALLOON]


def placeholder(namespace: str = "team-a", isolate: bool = False) -> dict[str, Any]:
    """Tekton's assistant's StatefulSet pod (its run's labels, its own two), as v1.15 makes it."""
    repel = {"labelSelector": {"matchLabels": {"app.kubernetes.io/component": "affinity-assistant"}},
             "topologyKey": "kubernetes.io/hostname"}
    anti: dict[str, Any] = ({"requiredDuringSchedulingIgnoredDuringExecution": [repel]} if isolate
                            else {"preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": 100, "podAffinityTerm": repel}]})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "affinity-assistant-c7b485007a-0", "namespace": namespace,
        "labels": {"tekton.dev/pipeline": "fan-out-in", "tekton.dev/pipelineRun": "build-42",
                   "app.kubernetes.io/instance": "affinity-assistant-c7b485007a",
                   "app.kubernetes.io/component": "affinity-assistant"}},
        "spec": {"containers": [{"name": "affinity-assistant", "image": "nop",
                                 "args": ["tekton_run_indefinitely"]}],
                 "volumes": [{"name": "workspace-0", "persistentVolumeClaim": {"claimName": "source"}}],
                 "affinity": {"podAntiAffinity": anti}}}


@pytest.mark.parametrize("isolate", [False, True], ids=["workspaces-or-pipelineruns", "isolate"])
def test_a_placeholder_in_an_opted_in_namespace_is_held_for_its_run_s_anchor(
        isolate: bool, facts: StaticFacts) -> None:
    """It mounts the run's claims: it must not take them to another node. Held by its own gate
    until the leader gives it the anchor's node; isolate-pipelinerun's required repulsion of
    other placeholders goes (two runs anchored on one node would wait for each other for good),
    the preferred one of the other modes stays."""
    pod = placeholder(isolate=isolate)
    decision = decide_in(pod, facts)
    assert decision.outcome is Outcome.PLACEHOLDER and decision.gated
    assert decision.run is not None and decision.run.name == "build-42"
    patched = jsonpatch.apply_patch(pod, list(decision.patch))
    assert patched["spec"]["schedulingGates"] == [{"name": gate.PLACEHOLDER_GATE}]
    anti = patched["spec"]["affinity"]["podAntiAffinity"]
    assert anti.get("requiredDuringSchedulingIgnoredDuringExecution", []) == []
    assert isolate or anti["preferredDuringSchedulingIgnoredDuringExecution"]
    again = decide_in(patched, facts)
    assert again.outcome is Outcome.ALREADY and again.patch == ()


def test_another_namespace_s_placeholder_is_left_to_tekton(facts: StaticFacts) -> None:
    decision = decide_in(placeholder("other", isolate=True), facts)
    assert decision.outcome is Outcome.NAMESPACE_DISABLED and decision.patch == ()
    facts.synced = False
    assert decide_in(placeholder(), facts).outcome is Outcome.NOT_SYNCED
