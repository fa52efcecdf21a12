"""Which pods the leader's pod watch asks the API server for, and which runs and pods its
handlers are given."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any, cast

import jsonpatch
import kopf

from controller.core.admission import admission, affinity
from controller.core.basics import names
from controller.core.model.tekton import RunRef
from controller.core.placement import balloon, gate
from controller.core.replica import glance
from controller.faces import kopf_handlers, reconciler
from controller.faces.streams import POD_SELECTORS, Streams, concerns, may_concern
from controller.kube.clusterview import Facts
from controller.settings import Settings
from tests import factories
from tests.conftest import StaticFacts
from tests.operator.test_runs import make


def matches(selector: str, labels: dict[str, str]) -> bool:
    """Enough of label selector semantics for `key=value` and `key` (exists)."""
    key, eq, value = selector.partition("=")
    return key in labels and (not eq or labels[key] == value)


def watched_by(labels: dict[str, str]) -> list[str]:
    return [name for name, selector in POD_SELECTORS.items() if matches(selector, labels)]


def admitted(pod: dict[str, Any], facts: StaticFacts) -> dict[str, Any]:
    review = factories.admission_review(pod)
    review["request"]["namespace"] = pod["metadata"]["namespace"]
    decision = admission.decide(review["request"], facts, gate_first_pods=True)
    patched: dict[str, Any] = jsonpatch.apply_patch(pod, list(decision.patch))
    return patched


def test_kopf_watches_only_the_policies() -> None:
    """Runs and pods come through our intake (faces/streams.py), which glances before
    decoding; nodes through the watch caches, which a new leader waits for."""
    watched = {h.selector.any_name  # type: ignore[union-attr]
               for h in kopf_handlers.registry._watching.get_all_handlers()}
    assert watched == {names.POLICY_PLURAL}


def test_each_pod_the_leader_serves_is_in_one_pod_watch_and_the_others_pods_in_none(
        facts: StaticFacts) -> None:
    """A first pod admission tied, a marked run's pod (pinned to Tekton's assistant or not),
    our balloon: one watch each. A TaskRun pod of a namespace that did not opt in, or one
    admission left alone: none, so its events never reach the leader."""
    first = admitted(factories.taskrun_pod(), facts)
    assert watched_by(first["metadata"]["labels"]) == ["pods-tied"]
    later = factories.taskrun_pod()
    later["metadata"]["labels"][names.LABEL_ANCHORED] = factories.RUN_UID
    assert watched_by(admitted(later, facts)["metadata"]["labels"]) == ["pods-marked"]
    pinned_ = copy.deepcopy(later)  # Tekton pinned it to its own assistant: ours in its place
    pinned_["spec"]["affinity"] = {"podAffinity": {
        affinity.REQUIRED: [factories.TEKTON_ASSISTANT_TERM]}}
    ours = admitted(pinned_, facts)
    assert len(affinity.balloon_terms(ours["spec"])) == 1
    assert watched_by(ours["metadata"]["labels"]) == ["pods-marked"]
    assert watched_by(balloon.selector_labels("uid-1")) == ["pods"]
    theirs = factories.taskrun_pod(namespace="not-opted")
    assert watched_by(admitted(theirs, facts)["metadata"]["labels"]) == []
    opted_out = factories.taskrun_pod(annotations={names.OPT_OUT_ANNOTATION: "false"})
    assert watched_by(admitted(opted_out, facts)["metadata"]["labels"]) == []
    assert watched_by({"app.kubernetes.io/managed-by": "tekton-pipelines"}) == []


def streams() -> tuple[Streams, Any]:
    operator, kube = make()
    api = SimpleNamespace(custom=SimpleNamespace(list_cluster_custom_object=None),
                          core=SimpleNamespace(list_pod_for_all_namespaces=None))
    return Streams(operator, api, 30.0), kube  # type: ignore[arg-type]


def pinned(namespace: str, run_uid: str) -> dict[str, Any]:
    pod = factories.taskrun_pod(namespace=namespace, run_uid=run_uid)
    term = affinity.term_for(RunRef(name="build-42", uid=run_uid), "kubernetes.io/hostname")
    pod["spec"].update(nodeName="n1", affinity={"podAffinity": {affinity.REQUIRED: [term]}})
    return pod


def raw(obj: dict[str, Any]) -> bytes:
    return b'{"type":"MODIFIED","object":' + json.dumps(obj, separators=(",", ":")).encode() + b"}"


def test_runs_and_task_pods_of_namespaces_that_did_not_opt_in_reach_no_handler() -> None:
    """Dropped from a glance, undecoded; and, decoded, by the exact test."""
    streams_, kube = streams()
    operator = streams_.operator
    theirs = factories.pipelinerun(namespace="not-opted", uid="their-uid")
    pod = pinned("not-opted", "their-uid")
    assert not may_concern(operator, glance.glance(raw(theirs)))
    assert not may_concern(operator, glance.glance(raw(pod)))
    streams_.on_run("MODIFIED", theirs)
    streams_.on_pod("MODIFIED", pod)
    assert kube.statefulsets == {} and not operator.index.knows("their-uid")
    ours = factories.pipelinerun(namespace="team-a", uid="our-uid")
    kube.runs[ours["metadata"]["name"]] = ours
    assert may_concern(operator, glance.glance(raw(ours)))
    streams_.on_run("ADDED", ours)
    assert balloon.balloon_name("our-uid") in kube.statefulsets
    streams_.on_pod("ADDED", pinned("team-a", "our-uid"))
    assert operator.index.knows("our-uid")


def test_runs_held_here_still_reach_their_handlers_after_their_namespace_opts_out() -> None:
    """A marked run, a run with a balloon, or any event before the namespaces are known."""
    streams_, _ = streams()
    operator = streams_.operator
    marked = factories.pipelinerun(namespace="off", uid="uid-1")
    marked["metadata"]["labels"] = {names.LABEL_ANCHORED: "uid-1"}
    assert may_concern(operator, glance.glance(raw(marked), streams_.intakes[0]._markers))
    pod = factories.taskrun_pod(namespace="off", run_uid="uid-1")
    pod["metadata"]["labels"][names.LABEL_ANCHORED] = "uid-1"
    assert may_concern(operator, glance.glance(raw(pod), streams_.intakes[1]._markers))
    operator.index.balloon_event({"metadata": {
        "name": "b-0", "namespace": "off", "uid": "pod-uid",
        "labels": {names.LABEL_RUN_UID: "uid-2"}}, "spec": {}}, deleted=False)
    held = factories.pipelinerun(namespace="off", uid="uid-2")
    assert may_concern(operator, glance.glance(raw(held)))
    assert concerns(operator, "off", "uid-2", {})
    operator.view.facts = Facts()  # not synced: nothing is known to be not ours
    assert may_concern(operator, glance.glance(raw(factories.pipelinerun(namespace="off"))))


def test_our_own_pods_are_always_decoded_and_handed_to_their_handler() -> None:
    streams_, _ = streams()
    operator = streams_.operator
    balloon_pod = {"metadata": {"name": "b-0", "namespace": "off", "uid": "pod-uid", "labels": {
        names.LABEL_MANAGED_BY: names.APP, names.LABEL_COMPONENT: names.COMPONENT_BALLOON,
        names.LABEL_RUN_UID: "uid-9"}}, "spec": {"nodeName": "n1"}}
    assert may_concern(operator, glance.glance(raw(balloon_pod), streams_.intakes[1]._markers))
    streams_.on_pod("ADDED", balloon_pod)
    assert operator.placement.node_of("off", "uid-9") == "n1"


def test_kopf_copies_nothing_of_an_event_s_object_to_diff_it() -> None:
    """kopf builds a diff base of every event's object before filters run (a deep copy);
    on.event handlers are given no diff, so ours is empty."""
    settings = reconciler.kopf_settings(Settings())
    body = kopf.Body(cast(kopf.RawBody, factories.pipelinerun()))
    assert settings.persistence.diffbase_storage.build(body=body) == {}


def test_the_handlers_are_all_on_event_so_an_empty_diff_base_loses_nothing() -> None:
    """A create/update/resume or daemon handler would need kopf's diff base (and would write
    kopf's state onto Tekton's objects): adding one means revisiting EventsOnly."""
    registry = kopf_handlers.registry
    assert list(registry._changing.get_all_handlers()) == []
    assert list(registry._spawning.get_all_handlers()) == []
    assert len(list(registry._watching.get_all_handlers())) == 1  # the policies'


def aa_pod(namespace: str, uid: str = "aa-uid") -> dict[str, Any]:
    """Tekton's placeholder pod as admission held it (in an opted-in namespace)."""
    return {"metadata": {"name": "affinity-assistant-0123456789-0", "namespace": namespace,
                         "uid": uid, "labels": {"tekton.dev/pipelineRun": "build-42",
                                                "app.kubernetes.io/instance": "affinity-assistant-0123456789",
                                                "app.kubernetes.io/component": "affinity-assistant"}},
            "spec": {"schedulingGates": [{"name": gate.PLACEHOLDER_GATE}]}}


def test_placeholders_of_opted_in_namespaces_are_watched_and_put_under_their_run_s_key() -> None:
    """Issue 48: a watch of their own; those of other namespaces are dropped from a glance. A
    placeholder is its run's work (found by namespace and name), and its run's look follows."""
    streams_, kube = streams()
    operator = streams_.operator
    assert watched_by(aa_pod("team-a")["metadata"]["labels"]) == ["pods-placeholders"]
    assert not may_concern(operator, glance.glance(raw(aa_pod("not-opted"))))
    assert may_concern(operator, glance.glance(raw(aa_pod("team-a"))))
    run = factories.pipelinerun()
    kube.runs[run["metadata"]["name"]] = run
    operator.reconcile_run(run)
    put: list[str] = []
    streams_.work.put = lambda key, *_: put.append(key)  # type: ignore[method-assign]
    intake = next(i for i in streams_.intakes if i.name == "pods-placeholders")
    intake._deliver("ADDED", aa_pod("team-a"))
    assert put == [factories.RUN_UID]
    streams_.on_pod("ADDED", aa_pod("team-a"))  # no anchor yet: held, and the run looked at
    assert operator.memory.get(factories.RUN_UID).placeholders
    assert put == [factories.RUN_UID, factories.RUN_UID]
