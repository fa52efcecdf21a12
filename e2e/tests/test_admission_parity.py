"""The decision table in every admission mode the API server serves, and policy mode and
webhook mode giving identical pods where both run.

Where the session's chart runs in policy mode (the API server serves MutatingAdmissionPolicy),
its policy, bound by the operator, mutates the namespaces carrying the opt-in label, and a second
replica, webhook only, answers a webhook configuration that selects namespaces by another label.
Each case creates the same pod (dry run: admission runs, nothing is stored) in a namespace of
each kind and requires the answer the table gives, and the same answer from both: the same
status, and the same resulting pod. Where the chart runs the webhook (no policy API served), the
table is held against the webhook alone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from kubernetes import client

from controller.core.admission import affinity
from controller.core.basics import names
from controller.core.placement import gate
from e2e.harness import chart
from e2e.harness.cluster import ClusterHandle
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.parity import Pair, assert_alike, terms
from tests import factories
from tests.fuzz import reviews

pytestmark = [pytest.mark.e2e, pytest.mark.matrix]

PARITY_LABEL = "e2e.tekton-coscheduler.dev/parity-webhook"
RUN, UID = "tekton.dev/pipelineRun", "tekton.dev/pipelineRunUID"
REQ = affinity.REQUIRED
USER_TERM = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
OUR_OTHER_TERM = {
    "labelSelector": {"matchLabels": {names.LABEL_MANAGED_BY: names.APP,
                                      names.LABEL_COMPONENT: "balloon",
                                      names.LABEL_RUN_UID: "someone-else"}},
    "topologyKey": "topology.kubernetes.io/zone",
}
NODE_AFFINITY = {REQ: {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ci"]}]}]}}


@pytest.fixture(scope="module")
def parity(cluster: ClusterHandle, coscheduler: Coscheduler) -> Iterator[Pair]:
    if coscheduler.env()["COSCHEDULER_ADMISSION_MODE"] != "policy":
        assert not chart.serves_policy_v1(cluster), (
            "the session's chart should have chosen policy mode on this API server")
        pytest.skip("this API server serves no MutatingAdmissionPolicy v1 and the session's "
                    "chart runs the webhook (E2E_ADMISSION_MODE=policy uses v1beta1 if on)")
    webhook = Coscheduler(
        cluster,
        name="parity-webhook",
        kubeconfig=coscheduler.kubeconfig,
        env_overrides={
            **coscheduler.env_overrides,
            "COSCHEDULER_ADMISSION_MODE": "webhook",
            "COSCHEDULER_RECONCILE": "false",
            "COSCHEDULER_NAMESPACE_LABEL": PARITY_LABEL,
        },
    )
    webhook.start()
    config = webhook.register_webhook(name="tekton-coscheduler-parity", label=PARITY_LABEL)
    suffix = uuid.uuid4().hex[:6]
    policy_ns = cluster.create_namespace(f"par-p-{suffix}", labels={names.NAMESPACE_LABEL: "true"})
    webhook_ns = cluster.create_namespace(f"par-w-{suffix}", labels={PARITY_LABEL: "true"})
    pair = Pair(cluster, policy_ns, webhook_ns)
    # Both paths are live once a plain TaskRun pod comes back pinned from each.
    cluster.wait_for(
        lambda: all(
            status == 201 and isinstance(made, dict) and terms(made)
            for status, made in pair.both(factories.taskrun_pod())
        ),
        timeout=30,
        what="policy binding and parity webhook in effect",
    )
    try:
        yield pair
    finally:
        webhook.unregister_webhook(config)
        webhook.stop()


@dataclass(frozen=True)
class Modes:
    """The admission modes this API server serves, each with a namespace it mutates."""

    pair: Pair  # makes the dry-run pods, in any namespace
    namespaces: dict[str, str]  # mode -> namespace
    opted_out: str  # a namespace no mode serves


    def create(self, pod: dict[str, Any]) -> dict[str, tuple[int, Any]]:
        return {mode: self.pair.create(pod, ns) for mode, ns in self.namespaces.items()}


@pytest.fixture(scope="module")
def modes(request: pytest.FixtureRequest, cluster: ClusterHandle, coscheduler: Coscheduler) -> Modes:
    if coscheduler.env()["COSCHEDULER_ADMISSION_MODE"] == "policy":
        pair: Pair = request.getfixturevalue("parity")
        return Modes(pair, {"policy": pair.policy_ns, "webhook": pair.webhook_ns},
                     cluster.create_namespace(f"par-n-{uuid.uuid4().hex[:6]}"))
    # The webhook only: the session's chart runs it, for the namespaces with the opt-in label.
    ns = cluster.create_namespace(f"par-o-{uuid.uuid4().hex[:6]}",
                                  labels={names.NAMESPACE_LABEL: "true"})
    pair = Pair(cluster, ns, ns)

    def pinned() -> bool:
        status, made = pair.create(factories.taskrun_pod(), ns)
        return status == 201 and isinstance(made, dict) and bool(terms(made))

    cluster.wait_for(pinned, timeout=30, what="the session's webhook in effect")
    return Modes(pair, {"webhook": ns}, cluster.create_namespace(f"par-n-{uuid.uuid4().hex[:6]}"))


def _pod(**kw: Any) -> dict[str, Any]:
    return factories.taskrun_pod(**kw)


def _with_labels(pod: dict[str, Any], changes: dict[str, str | None]) -> dict[str, Any]:
    """The pod with these labels set (None: removed)."""
    labels = pod["metadata"]["labels"]
    for key, value in changes.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    return pod


# What admission does with a case's pod: adds our balloon term, leaves it as it came, or the
# API server refuses the pod whatever admission does (a label value over 63 characters).
# Beside Tekton's assistant: a pod Tekton pinned to its placeholder gets our term in place of
# Tekton's, the user's terms kept in their order (swaps); the placeholder pod gets our
# placeholder gate, its required repulsion of other placeholders taken away and every other
# term kept (holds).
PINS, LEAVES, REFUSED = "pins", "leaves", "refused"
SWAPS, HOLDS = "swaps", "holds"
PIN = factories.TEKTON_ASSISTANT_TERM
ANTI_PREFERRED = {"weight": 7, "podAffinityTerm": USER_TERM}


def _cases() -> dict[str, tuple[dict[str, Any], str]]:
    uid_63 = "u" * 63
    cases = {
        "plain TaskRun pod": (_pod(), PINS),
        "existing nodeAffinity": (_pod(affinity={"nodeAffinity": NODE_AFFINITY}), PINS),
        "affinity is {}": (_pod(affinity={}), PINS),
        "podAffinity is {}": (_pod(affinity={"podAffinity": {}}), PINS),
        "required list is []": (_pod(affinity={"podAffinity": {REQ: []}}), PINS),
        "preferred terms only": (_pod(affinity={"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "podAffinityTerm": USER_TERM}]}}), PINS),
        "a user's required term": (_pod(affinity={"podAffinity": {REQ: [USER_TERM]}}), PINS),
        "anti-affinity kept": (_pod(affinity={"podAntiAffinity": {REQ: [USER_TERM]}}), PINS),
        "already carries a balloon term": (_pod(
            affinity={"podAffinity": {REQ: [USER_TERM, OUR_OTHER_TERM]}}), LEAVES),
        "opted out ' FALSE '": (_pod(annotations={names.OPT_OUT_ANNOTATION: " FALSE "}), LEAVES),
        "opted out with odd whitespace": (_pod(
            annotations={names.OPT_OUT_ANNOTATION: "\x1cfalse\u3000"}), LEAVES),
        "'fal\u017fe' (long s) is not 'false'": (
            _pod(annotations={names.OPT_OUT_ANNOTATION: "fal\u017fe"}), PINS),
        "annotation 'true'": (_pod(annotations={names.OPT_OUT_ANNOTATION: "true"}), PINS),
        "no annotations at all": (_pod(annotations={}), PINS),
        "uid label of 63 chars": (_pod(run_uid=uid_63), PINS),
        "no uid label: by run name": (_pod(run_uid=None), PINS),
        "uid label empty: by run name": (_with_labels(_pod(), {UID: ""}), PINS),
        "uid label of 64 chars (refused by the API server either way)": (
            _pod(run_uid="u" * 64), REFUSED),
        "neither label usable (refused either way)": (_with_labels(
            _pod(run_uid="u" * 64), {RUN: "r" * 64}), REFUSED),
        "empty taskRun label": (_with_labels(_pod(), {"tekton.dev/taskRun": ""}), LEAVES),
        "standalone TaskRun (no pipelineRun label)": (_with_labels(
            _pod(), {RUN: None, UID: None}), LEAVES),
        # A pod labelled as Tekton's assistant's is its placeholder, whatever else it carries.
        "Tekton's assistant pod": (_with_labels(
            _pod(), {"app.kubernetes.io/component": "affinity-assistant"}), HOLDS),
        "a balloon pod": (_with_labels(_pod(), {names.LABEL_MANAGED_BY: names.APP}), LEAVES),
        "pinned to Tekton's assistant": (_pod(
            affinity={"podAffinity": {REQ: [USER_TERM, PIN]}}), SWAPS),
        "pinned to Tekton's assistant alone": (_pod(affinity={"podAffinity": {REQ: [PIN]}}), SWAPS),
        "pinned, between two of the user's terms": (_pod(affinity={
            "podAffinity": {REQ: [USER_TERM, PIN, OUR_OTHER_TERM | {"labelSelector": {
                "matchLabels": {"app": "cache"}}}]},
            "podAntiAffinity": {REQ: [USER_TERM]}, "nodeAffinity": NODE_AFFINITY}), SWAPS),
        "pinned, opted out": (_pod(affinity={"podAffinity": {REQ: [PIN]}},
                                   annotations={names.OPT_OUT_ANNOTATION: "false"}), LEAVES),
        "pinned, already carries a balloon term": (_pod(
            affinity={"podAffinity": {REQ: [PIN, OUR_OTHER_TERM]}}), LEAVES),
        "run name at 63 chars": (_with_labels(_pod(run_uid=None), {RUN: "r" * 63}), PINS),
    }
    # A run with its balloon carries its mark (core/placement/mark.py): its pods keep the term, and the
    # key it was anchored with, whatever the run's opt-out and the namespace's policy say now.
    anchored: dict[str, str | None] = {names.LABEL_ANCHORED: factories.RUN_UID}
    opted_out = {names.OPT_OUT_ANNOTATION: "false"}
    cases["anchored, opted out since"] = (_with_labels(_pod(annotations=opted_out), anchored), PINS)
    cases["another run's mark, opted out"] = (_with_labels(
        _pod(annotations=opted_out), {names.LABEL_ANCHORED: "another-run"}), LEAVES)
    cases["anchored by zone"] = (_with_labels(_pod(annotations={
        names.ANNOTATION_TOPOLOGY_KEY: "topology.kubernetes.io/zone"}), anchored), PINS)
    for bad in ("/zone", "not a key", "a/b/c", f"{'x' * 254}/zone", "zone/" + "z" * 64):
        cases[f"anchored, key {bad[:20]!r} not valid: the namespace's"] = (_with_labels(
            _pod(annotations={names.ANNOTATION_TOPOLOGY_KEY: bad}), anchored), PINS)
    plain = _pod()
    plain["metadata"]["labels"] = {"app": "not-tekton"}
    cases["a pod that is not Tekton's"] = (plain, LEAVES)
    for mode in TEKTON_MODES:
        cases[f"placeholder, {mode}"] = (factories.placeholder_pod(mode=mode), HOLDS)
    cases["placeholder, isolate-pipelinerun, the run's own anti-affinity"] = (
        factories.placeholder_pod(mode="isolate-pipelinerun", anti_affinity={
            REQ: [USER_TERM], "preferredDuringSchedulingIgnoredDuringExecution": [ANTI_PREFERRED]}),
        HOLDS)
    gated = factories.placeholder_pod(mode="isolate-pipelinerun")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
    cases["placeholder with another gate"] = (gated, HOLDS)
    held = factories.placeholder_pod(mode="isolate-pipelinerun")
    held["spec"]["schedulingGates"] = [{"name": gate.PLACEHOLDER_GATE}]
    cases["placeholder already held"] = (held, LEAVES)
    cases["placeholder of no run"] = (_with_labels(factories.placeholder_pod(), {RUN: ""}), LEAVES)
    return cases


TEKTON_MODES = ("workspaces", "pipelineruns", "isolate-pipelinerun")


CASES = _cases()


def _required(spec: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = ((spec.get("affinity") or {}).get(kind) or {}).get(REQ) or []
    return found


def _selects_assistant(term: dict[str, Any], instance: bool) -> bool:
    labels = (term.get("labelSelector") or {}).get("matchLabels") or {}
    return (labels.get("app.kubernetes.io/component") == "affinity-assistant"
            and ("app.kubernetes.io/instance" in labels) is instance)


def _held(spec: dict[str, Any]) -> bool:
    return any(g.get("name") == gate.PLACEHOLDER_GATE for g in spec.get("schedulingGates") or [])


def _did(pod: dict[str, Any], status: int, made: Any) -> str:
    if status != 201:
        return REFUSED
    before, after = pod["spec"], made["spec"]
    if _held(after) and not _held(before):
        # The gate appended to the pod's gates; the required repulsion gone, all else kept.
        anti_before = dict((before.get("affinity") or {}).get("podAntiAffinity") or {})
        anti_after = dict((after.get("affinity") or {}).get("podAntiAffinity") or {})
        kept = [t for t in _required(before, "podAntiAffinity") if not _selects_assistant(t, False)]
        same_rest = ({k: v for k, v in anti_before.items() if k != REQ}
                     == {k: v for k, v in anti_after.items() if k != REQ})
        gates = [*(before.get("schedulingGates") or []), {"name": gate.PLACEHOLDER_GATE}]
        ok = (after["schedulingGates"] == gates and same_rest
              and _required(after, "podAntiAffinity") == kept)
        return HOLDS if ok else f"held, but {after.get('affinity')} {after['schedulingGates']}"
    added = len(affinity.balloon_terms(after)) - len(affinity.balloon_terms(before))
    if added == 0:
        return LEAVES
    if added != 1:
        return f"added {added} terms"
    pinned = _required(before, "podAffinity")
    if not any(_selects_assistant(t, True) for t in pinned):
        return PINS
    # Tekton's term gone, the user's kept in their order, ours last.
    kept = [t for t in pinned if not _selects_assistant(t, True)]
    return SWAPS if _required(after, "podAffinity")[:-1] == kept else (
        f"swapped, but {_required(after, 'podAffinity')}")


@pytest.mark.parametrize("case", list(CASES))
def test_the_decision_table_holds_in_every_mode_and_gives_the_same_pod_in_each(
    modes: Modes, case: str
) -> None:
    pod, expected = CASES[case]
    answers = modes.create(pod)
    assert {mode: _did(pod, *answer) for mode, answer in answers.items()} == {
        mode: expected for mode in answers}, answers
    if "policy" in answers:
        assert_alike(answers["policy"], answers["webhook"])


@pytest.mark.parametrize("case", [*(f"placeholder, {mode}" for mode in TEKTON_MODES),
                                  "pinned to Tekton's assistant"])
def test_another_namespace_s_pods_are_tekton_s_alone(modes: Modes, case: str) -> None:
    """A namespace that did not opt in: Tekton's placeholder and the pods it pins come back as
    they went, in every mode (the same case of the table is changed where the namespace opted
    in)."""
    pod, _ = CASES[case]
    status, made = modes.pair.create(pod, modes.opted_out)
    assert status == 201 and isinstance(made, dict), made
    assert _did(pod, status, made) == LEAVES
    assert made["spec"]["affinity"] == pod["spec"]["affinity"]
    assert not made["spec"].get("schedulingGates")


def test_the_namespace_policys_topology_key_in_both_modes(
    cluster: ClusterHandle, parity: Pair
) -> None:
    """Two CoschedulingPolicies in each namespace: the oldest wins in both modes."""
    with cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        for ns in (parity.policy_ns, parity.webhook_ns):
            for name, key in (("zzz-older", "topology.kubernetes.io/zone"),
                              ("aaa-newer", "example.com/rack")):
                custom.create_namespaced_custom_object(
                    names.POLICY_GROUP, names.POLICY_VERSION, ns, names.POLICY_PLURAL,
                    {"apiVersion": f"{names.POLICY_GROUP}/{names.POLICY_VERSION}",
                     "kind": names.POLICY_KIND, "metadata": {"name": name},
                     "spec": {"topologyKey": key}},
                )
                if name == "zzz-older":
                    time.sleep(1.1)  # creation times have one-second resolution
    try:
        def zone_in_both() -> bool:
            (_, p), (_, w) = parity.both(_pod())
            return all(isinstance(x, dict) and terms(x) and
                       terms(x)[-1]["topologyKey"] == "topology.kubernetes.io/zone"
                       for x in (p, w))

        cluster.wait_for(zone_in_both, timeout=30, what="the namespaces' key in both modes")
        for _ in range(5):
            made = parity.assert_same(_pod(affinity={"podAffinity": {REQ: [USER_TERM]}}))
            assert made is not None and terms(made)[-1]["topologyKey"] == "topology.kubernetes.io/zone"
    finally:
        with cluster.api_client() as api:
            custom = client.CustomObjectsApi(api)
            for ns in (parity.policy_ns, parity.webhook_ns):
                for name in ("zzz-older", "aaa-newer"):
                    custom.delete_namespaced_custom_object(
                        names.POLICY_GROUP, names.POLICY_VERSION, ns, names.POLICY_PLURAL, name)

        # Policy mode follows once the operator has re-pointed the bindings
        # (docs/design/admission.md: a window of about a second); the next tests start after it.
        def default_in_both() -> bool:
            (_, p), (_, w) = parity.both(_pod())
            return all(isinstance(x, dict) and terms(x) and
                       terms(x)[-1]["topologyKey"] == "kubernetes.io/hostname" for x in (p, w))

        cluster.wait_for(default_in_both, timeout=30, what="the default key back in both modes")


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(pod=reviews.pods())
def test_generated_pods_give_the_same_pod_in_both_modes(parity: Pair, pod: Any) -> None:
    """Generated TaskRun pods (the fuzzer's): those the API server takes come back alike; those
    it refuses are refused in both modes."""
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict) or not reviews.schema_valid(pod):
        return
    parity.assert_same(pod)
