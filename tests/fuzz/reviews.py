"""Fuzzing the admission path: generated and mutated AdmissionReview bodies, and the oracle that
judges each answer.

The oracle (`judge`) runs a body through the webhook's own answer function, as the HTTP server
does, and requires: no exception escapes and no decision fails inside (outcome "error"); the
answer is HTTP 400 with a reason for a body that is not a review, else a valid AdmissionReview
v1 for the same uid with allowed=true; a patch applies to the object (jsonpatch), adds exactly
one balloon term, keeps every term and every other field the pod had, is not offered again to
the patched pod (reinvocation), and turns a pod that passes the Kubernetes schema into one that
still does.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import jsonschema
import kubernetes_validate
from hypothesis import strategies as st
from referencing import Registry, Resource

from controller.core.admission import admission, affinity
from controller.core.basics import names
from controller.core.basics.fragments import is_label_value
from controller.core.placement import gate
from controller.faces import webhook
from controller.metrics import Metrics
from tests import factories
from tests.conftest import StaticFacts

SCHEMA_VERSION = "1.36"
REQUIRED = affinity.REQUIRED


class Finding(AssertionError):
    """An answer that breaks the contract; the message says which part."""


# -- the oracle ---------------------------------------------------------------------------------


@functools.cache
def _pod_validator() -> jsonschema.protocols.Validator:
    """The strict Pod schema of Kubernetes 1.36, compiled once (kubernetes_validate.validate
    re-reads its definitions on every call: 12 ms a pod against about 1 ms here)."""
    root = f"kubernetes-json-schema/v{SCHEMA_VERSION}.0-local-strict"
    schema = kubernetes_validate.utils.schema_contents(f"{root}/pod-v1.json", SCHEMA_VERSION)
    defs = kubernetes_validate.utils.schema_contents(f"{root}/_definitions.json", SCHEMA_VERSION)
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    validator: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(
        schema, registry=registry
    )
    return validator


def schema_valid(pod: Any) -> bool:
    return isinstance(pod, dict) and _pod_validator().is_valid(pod)


@dataclass
class Tally:
    tried: int = 0
    malformed: int = 0
    patched: int = 0
    schema_checked: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


_METRICS = Metrics()


def judge(body: bytes, facts: StaticFacts, tally: Tally | None = None) -> None:
    """Raises Finding when the answer to `body` breaks the contract."""
    tally = tally if tally is not None else Tally()
    tally.tried += 1
    outcome = "malformed"
    try:
        _, request = admission.parse(body)
    except admission.MalformedReview:
        request = None
    if request is not None:
        try:  # the server would allow the pod unchanged; the fuzzer wants to know
            outcome = str(admission.decide(request, facts).outcome)
        except Exception as exc:
            raise Finding(f"the decision raised: {exc!r}") from exc
    tally.outcomes[outcome] = tally.outcomes.get(outcome, 0) + 1
    try:
        resp = webhook._answer(body, facts, _METRICS)
    except Exception as exc:  # the server would answer 500: the API server then fails the pod
        raise Finding(f"exception escaped: {exc!r}") from exc
    answer = json.loads(resp.body)  # type: ignore[arg-type]
    if request is None:
        tally.malformed += 1
        if resp.status != 400 or not isinstance(answer.get("error"), str) or not answer["error"]:
            raise Finding(f"a malformed body got {resp.status} {answer!r}")
        return
    if resp.status != 200:
        raise Finding(f"status {resp.status} for a well-formed review")
    _check_envelope(answer, request["uid"])
    if "patch" in answer["response"]:
        tally.patched += 1
        ops = json.loads(base64.b64decode(answer["response"]["patch"]))
        _check_patch(dict(request), ops, facts, tally)


def _check_envelope(answer: Any, uid: str) -> None:
    if answer.get("apiVersion") != "admission.k8s.io/v1" or answer.get("kind") != "AdmissionReview":
        raise Finding(f"not an AdmissionReview v1: {answer!r}")
    response = answer.get("response") or {}
    if response.get("uid") != uid or response.get("allowed") is not True:
        raise Finding(f"wrong uid or not allowed: {response!r}")
    extra = set(response) - {"uid", "allowed", "patch", "patchType"}
    if extra or (("patch" in response) != (response.get("patchType") == "JSONPatch")):
        raise Finding(f"unexpected response fields: {response!r}")


def _check_patch(
    request: dict[str, Any], ops: Any, facts: StaticFacts, tally: Tally
) -> None:
    pod = request["object"]
    try:
        patched = jsonpatch.apply_patch(pod, ops)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError) as exc:
        raise Finding(f"patch does not apply: {exc}; ops={ops!r}") from exc
    spec = patched.get("spec") or {}
    ours = affinity.balloon_terms(spec)
    if len(ours) != 1:
        raise Finding(f"{len(ours)} balloon terms after the patch")
    before = _required_terms(pod.get("spec"))
    if _required_terms(spec)[: len(before)] != before:
        raise Finding("an existing required podAffinity term was changed or dropped")
    if _without_affinity(patched) != _without_affinity(pod):
        raise Finding("the patch touched more than spec.affinity, our gate and our tied label")
    again = copy.deepcopy(request)
    again["object"] = patched
    if admission.decide(again, facts).patch:
        raise Finding("reinvocation patched the pod again")
    if schema_valid(pod):
        tally.schema_checked += 1
        errors = sorted(_pod_validator().iter_errors(patched), key=str)
        if errors:
            raise Finding(f"a schema-valid pod became invalid: {errors[0].message}")


def _required_terms(spec: Any) -> list[Any]:
    aff = spec.get("affinity") if isinstance(spec, dict) else None
    pod_aff = aff.get("podAffinity") if isinstance(aff, dict) else None
    terms = pod_aff.get(REQUIRED) if isinstance(pod_aff, dict) else None
    return list(terms) if isinstance(terms, list) else []


def _without_affinity(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod but for what admission may add: the term, our gate and the tied label."""
    out = copy.deepcopy(pod)
    if isinstance(out.get("spec"), dict):
        out["spec"].pop("affinity", None)
        gates = out["spec"].get("schedulingGates")
        if isinstance(gates, list):
            out["spec"]["schedulingGates"] = [g for g in gates if g != {"name": gate.GATE}] or None
            if out["spec"]["schedulingGates"] is None:
                del out["spec"]["schedulingGates"]
    labels = (out.get("metadata") or {}).get("labels")
    if isinstance(labels, dict) and labels.get(names.LABEL_TIED) == "true":
        del labels[names.LABEL_TIED]
    return out


# -- the generators -----------------------------------------------------------------------------
# Module-level strategies: hypothesis validates a strategy on first use, so building them inside
# a composite each draw costs more than the draw.

HOSTNAME_OR_ZONE = st.sampled_from(["kubernetes.io/hostname", "topology.kubernetes.io/zone"])
NAMESPACES = st.sampled_from(["team-a", "team-a", "team-a", "team-b", "off"])
# Strings that meet label rules, break them, or sit at their limits.
label_values = st.one_of(
    st.from_regex(r"\A[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?\Z"),
    st.sampled_from(["x" * 63, "x" * 64, "", "-bad", "bad-", "a b", "ünï", "a/b", factories.RUN_UID]),
    st.text(max_size=80),
)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
junk: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
# Fresh objects each draw: a shared {} would be filled by one example and seen by the next.
empties: st.SearchStrategy[Any] = st.one_of(st.sampled_from([None, ""]), st.builds(dict), st.builds(list))
TEKTON_LABELS = st.sampled_from([
    "tekton.dev/pipelineRun", "tekton.dev/pipelineRunUID", "tekton.dev/taskRun",
    "app.kubernetes.io/component", names.LABEL_MANAGED_BY,
])
OPT_OUT_VALUES = st.sampled_from(["false", " FALSE ", "False", "true", "", "no"])
user_label = st.from_regex(r"\A[a-z]{1,8}\Z")


def _term(draw: st.DrawFn, ours: bool) -> dict[str, Any]:
    labels = {"app": draw(user_label)}
    if ours:
        labels = {names.LABEL_MANAGED_BY: names.APP, names.LABEL_COMPONENT: "balloon",
                  names.LABEL_RUN_UID: factories.RUN_UID}
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": draw(HOSTNAME_OR_ZONE)}


@st.composite
def affinities(draw: st.DrawFn, valid: bool) -> Any:
    """A pod's affinity: absent, empty, partial, with user terms, with ours, or (not valid)
    the wrong shape at any level."""
    if not valid and draw(st.integers(0, 4)) == 0:
        return draw(junk)
    shape = draw(st.integers(0, 5))
    if shape == 0:
        return None
    aff: dict[str, Any] = {}
    if shape in (2, 4, 5):
        aff["nodeAffinity"] = {REQUIRED: {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ci"]}]}]}}
    if shape == 3:
        aff["podAffinity"] = {}
    if shape == 4:
        terms = [_term(draw, ours=False) for _ in range(draw(st.integers(0, 3)))]
        if draw(st.integers(0, 4)) == 0:
            terms.append(_term(draw, ours=True))
        aff["podAffinity"] = {REQUIRED: terms}
        if draw(st.booleans()):
            aff["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": 10, "podAffinityTerm": _term(draw, ours=False)}]
    if shape == 5:
        aff["podAntiAffinity"] = {REQUIRED: [_term(draw, ours=False)]}
    if not valid and bool(aff) and draw(st.booleans()):  # bool(): mypy infers draw from `aff`
        aff[draw(st.sampled_from(sorted(aff)))] = draw(st.one_of(empties, junk))
    return aff


@st.composite
def pods(draw: st.DrawFn) -> Any:
    """TaskRun pods as the API server hands them over (most), and pods broken anywhere."""
    valid = draw(st.integers(0, 3)) > 0
    pod = factories.taskrun_pod(
        run_uid=factories.RUN_UID if draw(st.integers(0, 4)) else None,
        namespace=draw(NAMESPACES),
    )
    labels = pod["metadata"]["labels"]
    for _ in range(draw(st.integers(0, 2))):
        key = draw(TEKTON_LABELS)
        if draw(st.booleans()):
            labels.pop(key, None)
        else:
            labels[key] = draw(label_values if valid else st.one_of(label_values, junk))
    if valid:
        pod["metadata"]["labels"] = {
            k: v for k, v in labels.items() if isinstance(v, str) and is_label_value(v)
        }
    aff = draw(affinities(valid))
    if aff is not None:
        pod["spec"]["affinity"] = aff
    if draw(st.integers(0, 5)) == 0:
        pod["metadata"]["annotations"][names.OPT_OUT_ANNOTATION] = draw(OPT_OUT_VALUES)
    if not valid:
        for _ in range(draw(st.integers(1, 3))):
            part = draw(st.sampled_from(["metadata", "spec", "labels", "annotations", "namespace"]))
            value = draw(st.one_of(empties, junk))
            if part in ("metadata", "spec"):
                pod[part] = value
            elif isinstance(pod.get("metadata"), dict):
                pod["metadata"][part] = value
    return pod


@st.composite
def facts(draw: st.DrawFn) -> StaticFacts:
    keys = {}
    if draw(st.integers(0, 3)) == 0:
        keys["team-a"] = draw(HOSTNAME_OR_ZONE)
    return StaticFacts(
        enabled={"team-a"} | ({"team-b"} if draw(st.booleans()) else set()),
        synced=draw(st.integers(0, 19)) > 0,
        keys=keys,
    )


OPERATIONS = st.sampled_from(["CREATE"] * 8 + ["UPDATE", "DELETE", "CONNECT"])
REQUEST_FIELDS = st.sampled_from(["uid", "kind", "object", "namespace", "operation", "request",
                                  "apiVersion", "subResource"])


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Bodies the webhook may receive: reviews of generated pods (most), reviews broken at one
    field, JSON that is no review, bytes that are no JSON, and truncated reviews."""
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind == 1:
        return json.dumps(draw(junk)).encode()
    pod = draw(pods())
    review = factories.admission_review({}, operation=draw(OPERATIONS))
    request = review["request"]
    request["object"] = pod
    meta = pod.get("metadata")
    request["namespace"] = meta.get("namespace") if isinstance(meta, dict) else ""
    if kind == 2:
        target = draw(REQUEST_FIELDS)
        value = draw(st.one_of(empties, junk, st.sampled_from(["status", "binding"])))
        if target in ("request", "apiVersion"):
            review[target] = value
        else:
            request[target] = value
    text = json.dumps(review)
    if kind == 3:
        text = text[: draw(st.integers(0, len(text)))]
    return text.encode()
