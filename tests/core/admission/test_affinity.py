"""The affinity term: appended, never replacing; idempotent; a valid pod spec comes out."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.core.admission import affinity
from controller.core.basics import names
from controller.core.model.tekton import RunRef
from tests import factories

REQ = affinity.REQUIRED
PREF = "preferredDuringSchedulingIgnoredDuringExecution"

label_values = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\Z")
keys = st.sampled_from(["kubernetes.io/hostname", "topology.kubernetes.io/zone", "disk", "team"])


def user_term(key: str, value: str, topology: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology}


terms = st.builds(user_term, st.sampled_from(["app", "tier"]), label_values, keys)
node_terms = st.builds(
    lambda k, v: {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]},
    keys, label_values,
)
pod_affinities = st.fixed_dictionaries(
    {}, optional={REQ: st.lists(terms, max_size=3), PREF: st.lists(
        st.builds(lambda t, w: {"weight": w, "podAffinityTerm": t}, terms, st.integers(1, 100)),
        max_size=2)},
)
affinities = st.fixed_dictionaries(
    {},
    optional={
        "podAffinity": pod_affinities,
        "podAntiAffinity": st.fixed_dictionaries({}, optional={REQ: st.lists(terms, max_size=2)}),
        "nodeAffinity": st.fixed_dictionaries(
            {}, optional={REQ: st.builds(lambda t: {"nodeSelectorTerms": t}, st.lists(node_terms, min_size=1, max_size=2))}
        ),
    },
)
maybe_affinity = st.one_of(st.none(), affinities)
runs = st.builds(RunRef, label_values, st.uuids().map(str))


def pod_with(aff: dict[str, Any] | None) -> dict[str, Any]:
    return factories.taskrun_pod(affinity=aff)


def apply(pod: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = jsonpatch.apply_patch(pod, patch)
    return result


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aff=maybe_affinity, run=runs, topology=keys)
def test_patch_appends_term_and_keeps_everything_else(aff: Any, run: RunRef, topology: str) -> None:
    pod = pod_with(aff)
    before = copy.deepcopy(pod)
    term = affinity.term_for(run, topology)
    assert term is not None
    patched = apply(pod, affinity.patch_for(pod["spec"], term))

    assert pod == before, "patch_for must not modify its input"
    required = patched["spec"]["affinity"]["podAffinity"][REQ]
    assert required[-1] == term
    # Every term and field the user had is still there, in order.
    own = (aff or {}).get("podAffinity", {}).get(REQ, [])
    assert required[:-1] == own
    for key in ("podAntiAffinity", "nodeAffinity"):
        assert patched["spec"]["affinity"].get(key) == (aff or {}).get(key)
    assert patched["spec"]["affinity"]["podAffinity"].get(PREF) == (aff or {}).get("podAffinity", {}).get(PREF)
    patched["spec"].pop("affinity")
    before["spec"].pop("affinity", None)
    assert patched == before, "nothing outside spec.affinity changes"


@settings(max_examples=200, deadline=None)
@given(aff=maybe_affinity, run=runs, topology=keys, other=keys)
def test_reinvocation_adds_nothing(aff: Any, run: RunRef, topology: str, other: str) -> None:
    pod = pod_with(aff)
    term = affinity.term_for(run, topology)
    assert term is not None
    once = apply(pod, affinity.patch_for(pod["spec"], term))
    # A second invocation, even one computing a different topology key, adds nothing.
    second = affinity.term_for(run, other)
    assert second is not None
    assert affinity.patch_for(once["spec"], second) == []
    assert affinity.with_term(once["spec"], second) == once["spec"]


@settings(max_examples=200, deadline=None)
@given(aff=maybe_affinity, run=runs, topology=keys)
def test_patch_and_pure_merge_agree(aff: Any, run: RunRef, topology: str) -> None:
    pod = pod_with(aff)
    term = affinity.term_for(run, topology)
    assert term is not None
    assert apply(pod, affinity.patch_for(pod["spec"], term))["spec"] == affinity.with_term(pod["spec"], term)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aff=maybe_affinity, run=runs, topology=keys)
def test_output_is_a_valid_pod(aff: Any, run: RunRef, topology: str) -> None:
    pod = pod_with(aff)
    term = affinity.term_for(run, topology)
    assert term is not None
    patched = apply(pod, affinity.patch_for(pod["spec"], term))
    kubernetes_validate.validate(patched, "1.36", strict=True)


def test_term_selects_balloon_by_uid_when_known() -> None:
    term = affinity.term_for(RunRef("build-42", "abc-123"), "kubernetes.io/hostname")
    assert term == {
        "labelSelector": {"matchLabels": {
            names.LABEL_MANAGED_BY: names.APP,
            names.LABEL_COMPONENT: names.COMPONENT_BALLOON,
            names.LABEL_RUN_UID: "abc-123",
        }},
        "topologyKey": "kubernetes.io/hostname",
    }


def test_term_falls_back_to_run_name_without_uid() -> None:
    term = affinity.term_for(RunRef("build-42", ""), "topology.kubernetes.io/zone")
    assert term is not None
    assert term["labelSelector"]["matchLabels"][names.LABEL_RUN] == "build-42"
    assert names.LABEL_RUN_UID not in term["labelSelector"]["matchLabels"]
    assert term["topologyKey"] == "topology.kubernetes.io/zone"


@pytest.mark.parametrize("name", ["", "x" * 64, "bad name", "-leading"])
def test_no_term_when_labels_cannot_make_a_selector(name: str) -> None:
    assert affinity.term_for(RunRef(name, ""), "kubernetes.io/hostname") is None


def test_name_of_63_chars_is_still_a_valid_selector() -> None:
    name = "r" * 63
    term = affinity.term_for(RunRef(name, ""), "kubernetes.io/hostname")
    assert term is not None
    pod = factories.taskrun_pod(run=name, run_uid=None)
    kubernetes_validate.validate(apply(pod, affinity.patch_for(pod["spec"], term)), "1.36", strict=True)


def test_null_fields_are_replaced_not_appended_to() -> None:
    pod = factories.taskrun_pod()
    pod["spec"]["affinity"] = {"podAffinity": {REQ: None}}
    term = affinity.term_for(RunRef("r", "u"), "kubernetes.io/hostname")
    assert term is not None
    patched = apply(pod, affinity.patch_for(pod["spec"], term))
    assert patched["spec"]["affinity"]["podAffinity"][REQ] == [term]
