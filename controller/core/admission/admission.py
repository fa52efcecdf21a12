"""Pure: an AdmissionReview for a Pod CREATE in, the AdmissionReview answer out.

Every request with a uid gets `allowed: true`; the only question is whether a patch comes
with it. Refusing a pod is never our call, and leaving one alone is always safe: a pod
without the term simply schedules as it would without us.
"""

from __future__ import annotations

import base64
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from controller.core.admission import affinity
from controller.core.basics.fragments import is_label_value
from controller.core.model import assistant, tekton
from controller.core.placement import gate, mark

API_VERSION = "admission.k8s.io/v1"


class Outcome(enum.StrEnum):
    PATCHED = "patched"
    ALREADY = "already-anchored"
    NOT_TASKRUN_POD = "not-a-taskrun-pod"
    NOT_POD_CREATE = "not-a-pod-create"
    NAMESPACE_DISABLED = "namespace-disabled"
    OPTED_OUT = "opted-out"
    PLACEHOLDER = "tekton-placeholder-held"
    NOT_SYNCED = "not-synced"
    INVALID_LABELS = "invalid-labels"
    INVALID_OBJECT = "invalid-object"
    MALFORMED = "malformed"


class Facts(Protocol):
    """What the webhook knows about the cluster now (see clusterview.py)."""

    @property
    def synced(self) -> bool: ...
    def namespace_enabled(self, namespace: str) -> bool: ...
    def topology_key(self, namespace: str) -> str: ...


class MalformedReview(ValueError):
    """A body that is not an AdmissionReview v1 request we can answer."""


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    patch: tuple[dict[str, Any], ...] = ()
    run: tekton.RunRef | None = None
    gated: bool = False  # held until the run's balloon pod is bound (core/placement/gate.py)


def parse(body: bytes) -> tuple[str, Mapping[str, Any]]:
    """The request's uid and the request itself, or MalformedReview saying what is wrong."""
    try:
        review = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedReview(f"body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise MalformedReview("body is not a JSON object")
    if review.get("kind") != "AdmissionReview":
        raise MalformedReview(f"kind is {review.get('kind')!r}, expected 'AdmissionReview'")
    if review.get("apiVersion") != API_VERSION:
        raise MalformedReview(
            f"apiVersion is {review.get('apiVersion')!r}, expected {API_VERSION!r}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise MalformedReview("request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("request.uid is missing or not a string")
    return uid, request


def decide(request: Mapping[str, Any], facts: Facts, gate_first_pods: bool = False) -> Decision:
    """`gate_first_pods`: a pod of a run not marked yet (core/placement/mark.py) is made before the
    run's balloon is, or just after: it waits behind a scheduling gate until the balloon pod is
    bound (core/placement/gate.py). A marked run's pods are not gated: they are its later ones, made
    (as a rule) once the first have run beside a bound balloon."""
    kind = request.get("kind") or {}
    obj = request.get("object")
    if (
        not isinstance(kind, dict)
        or (kind.get("group"), kind.get("kind")) != ("", "Pod")
        or request.get("operation") != "CREATE"
        or request.get("subResource")
        or not isinstance(obj, dict)
    ):
        return Decision(Outcome.NOT_POD_CREATE)
    meta = _mapping(obj.get("metadata"))
    labels = _mapping(meta.get("labels"))
    namespace = request.get("namespace") or meta.get("namespace") or ""
    if placeholder := assistant.placeholder_run(labels):
        return _placeholder(obj, placeholder, namespace, facts)
    run = tekton.task_run_pod_run(labels)
    if run is None:
        return Decision(Outcome.NOT_TASKRUN_POD)
    if not isinstance(obj.get("spec"), dict):
        # No patch can add to a spec that is not an object; the API server never sends one.
        return Decision(Outcome.INVALID_OBJECT, run=run)
    spec = obj["spec"]
    annotations = _mapping(meta.get("annotations"))
    if affinity.carries_our_term(spec):
        return Decision(Outcome.ALREADY, run=run)
    if not facts.synced:
        return Decision(Outcome.NOT_SYNCED, run=run)
    # A pod of a run that has its balloon keeps its term to the run's end, whatever the
    # namespace's label, the run's opt-out or the namespace's policy say now
    # (core/placement/mark.py).
    anchored = mark.pod_anchored(labels)
    if not isinstance(namespace, str) or not (anchored or facts.namespace_enabled(namespace)):
        return Decision(Outcome.NAMESPACE_DISABLED, run=run)
    if tekton.opted_out(annotations) and not anchored:
        return Decision(Outcome.OPTED_OUT, run=run)
    key = (mark.topology_key(annotations) if anchored else None) or facts.topology_key(namespace)
    term = affinity.term_for(run, key)
    if term is None:
        return Decision(Outcome.INVALID_LABELS, run=run)
    # Tekton's assistant pinned it to its placeholder: the scheduler wants ONE pod matching
    # every required term of a pod, and none is both that placeholder and our balloon, so
    # Tekton's term goes and ours stands in its place (the placeholder follows the balloon).
    # The removals come first: the term is then appended to what is left.
    ops = [*assistant.unpin(spec), *affinity.patch_for(spec, term)]
    if not anchored:
        ops = [*ops, *mark.tie(labels)]
    # Only a pod that names its run's uid: the leader finds the pods it releases by it.
    gated = gate_first_pods and not anchored and bool(run.uid) and is_label_value(run.uid)
    if gated:
        ops = [*ops, *gate.add(spec)]
    return Decision(Outcome.PATCHED, tuple(ops), run, gated)


def _placeholder(obj: Mapping[str, Any], run: str, namespace: Any, facts: Facts) -> Decision:
    """The placeholder pod of Tekton's assistant: in an opted-in namespace it mounts the run's
    claims, so it is held by its own gate until the leader has given it the anchor's node (or
    let it go where it will, for a run that gets no balloon); isolate-pipelinerun's required
    repulsion of other placeholders goes, or two runs anchored on one node would hold each
    other's placeholder for good. Another namespace's is Tekton's alone."""
    ref = tekton.RunRef(name=run, uid="")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return Decision(Outcome.INVALID_OBJECT, run=ref)
    if gate.held(spec, gate.PLACEHOLDER_GATE):
        return Decision(Outcome.ALREADY, run=ref)
    if not facts.synced:
        return Decision(Outcome.NOT_SYNCED, run=ref)
    if not isinstance(namespace, str) or not facts.namespace_enabled(namespace):
        return Decision(Outcome.NAMESPACE_DISABLED, run=ref)
    ops = [*assistant.unrepel(spec), *gate.add(spec, gate.PLACEHOLDER_GATE)]
    return Decision(Outcome.PLACEHOLDER, tuple(ops), ref, gated=True)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def response(uid: str, decision: Decision) -> dict[str, Any]:
    answer: dict[str, Any] = {"uid": uid, "allowed": True}
    if decision.patch:
        answer["patchType"] = "JSONPatch"
        answer["patch"] = base64.b64encode(json.dumps(list(decision.patch)).encode()).decode()
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": answer}
