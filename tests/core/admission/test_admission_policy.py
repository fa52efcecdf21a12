"""Policy mode: the bindings that make the chart's MutatingAdmissionPolicy act as the webhook."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from controller.core.admission import admission_policy as ap
from controller.core.policy import policy
from controller.settings import Settings

MODE = ap.PolicyMode(
    policy_name="tcs-tekton-coscheduler",
    policy_uid="uid-1",
    namespace_label="tekton-coscheduler.dev/enabled",
    namespace_label_value="true",
    excluded_namespaces=("tekton-coscheduler", "kube-system"),
    default_topology_key="kubernetes.io/hostname",
    custom_policy_uid="uid-2",
)


def resolution(name: str, created: str, spec: dict[str, Any]) -> policy.PolicyResolution:
    obj = {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}
    return policy.resolve(Settings().default_policy(), [obj])


def selector(binding: dict[str, Any]) -> list[dict[str, Any]]:
    expressions: list[dict[str, Any]] = binding["spec"]["matchResources"]["namespaceSelector"][
        "matchExpressions"
    ]
    return expressions


def test_one_default_binding_for_every_enabled_namespace_but_ours_and_kube_system() -> None:
    [binding] = ap.desired(MODE, {})
    assert binding["metadata"]["name"] == "tcs-tekton-coscheduler-default"
    assert binding["spec"] == {
        "policyName": "tcs-tekton-coscheduler",
        "matchResources": {"namespaceSelector": {"matchExpressions": [
            {"key": "tekton-coscheduler.dev/enabled", "operator": "In", "values": ["true"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", "tekton-coscheduler"]},
        ]}},
    }
    assert "paramRef" not in binding["spec"]  # params null: the policy's default key
    owner = binding["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "MutatingAdmissionPolicy", "tcs-tekton-coscheduler", "uid-1")


def test_a_namespace_whose_policy_sets_another_key_gets_its_own_binding_to_that_policy() -> None:
    resolutions = {
        "team-zone": resolution("zone", "2026-01-01T00:00:00Z",
                                {"topologyKey": "topology.kubernetes.io/zone"}),
        "team-host": resolution("host", "2026-01-01T00:00:00Z",
                                {"topologyKey": "kubernetes.io/hostname"}),
        "team-bad": resolution("bad", "2026-01-01T00:00:00Z", {"topologyKey": "not a key!"}),
        "team-iso": resolution("iso", "2026-01-01T00:00:00Z", {"isolation": "required"}),
    }
    overridden = ap.overrides(resolutions, MODE.default_topology_key)
    assert overridden == {"team-zone": "zone"}
    default, own = ap.desired(MODE, overridden)
    assert "team-zone" in selector(default)[1]["values"]
    assert own["metadata"]["name"] == "tcs-tekton-coscheduler-ns-team-zone"
    assert own["spec"]["paramRef"] == {"name": "zone", "parameterNotFoundAction": "Allow"}
    # Only these bind the policy with a parameter (unapplied for a while after an API server
    # start); the default binding's policy has none.
    assert (default["spec"]["policyName"], own["spec"]["policyName"]) == (
        "tcs-tekton-coscheduler", "tcs-tekton-coscheduler-custom")
    owner = own["metadata"]["ownerReferences"][0]
    assert (owner["name"], owner["uid"]) == ("tcs-tekton-coscheduler-custom", "uid-2")
    assert selector(own)[1] == {"key": "kubernetes.io/metadata.name", "operator": "In",
                                "values": ["team-zone"]}


def test_without_the_policy_with_a_parameter_every_namespace_keeps_the_default_binding() -> None:
    alone = dataclasses.replace(MODE, custom_policy_uid="")
    [binding] = ap.desired(alone, {"team-zone": "zone"})
    assert "team-zone" not in selector(binding)[1]["values"]


def test_the_oldest_policy_of_a_namespace_is_the_one_bound() -> None:
    both = policy.resolve(Settings().default_policy(), [
        {"metadata": {"name": "aaa-new", "creationTimestamp": "2026-02-01T00:00:00Z"},
         "spec": {"topologyKey": "example.com/rack"}},
        {"metadata": {"name": "zzz-old", "creationTimestamp": "2026-01-01T00:00:00Z"},
         "spec": {"topologyKey": "topology.kubernetes.io/zone"}},
    ])
    assert ap.overrides({"team": both}, MODE.default_topology_key) == {"team": "zzz-old"}


def test_changes_create_what_is_missing_and_delete_strays() -> None:
    wanted = ap.desired(MODE, {"team-zone": "zone"})
    stray = copy.deepcopy(wanted[1])
    stray["metadata"]["name"] = "tcs-tekton-coscheduler-ns-gone"
    got = ap.changes(wanted, [stray])
    assert [b["metadata"]["name"] for b in got.create] == [
        "tcs-tekton-coscheduler-default", "tcs-tekton-coscheduler-ns-team-zone"]
    assert got.delete == ("tcs-tekton-coscheduler-ns-gone",) and not got.replace


def test_what_the_api_server_added_is_no_change_but_a_different_spec_is() -> None:
    wanted = ap.desired(MODE, {"team-zone": "zone"})
    stored = copy.deepcopy(wanted)
    for b in stored:
        b["metadata"].update(resourceVersion="7", uid="x", generation=1)
        b["spec"]["matchResources"].update(matchPolicy="Equivalent", objectSelector={})
        b["metadata"]["labels"]["extra"] = "kept"
    assert ap.changes(wanted, stored).empty
    stored[1]["spec"]["paramRef"]["name"] = "older"
    got = ap.changes(wanted, stored)
    assert [(b["metadata"]["name"], rv) for b, rv in got.replace] == [
        ("tcs-tekton-coscheduler-ns-team-zone", "7")]


def test_a_leftover_param_ref_is_replaced() -> None:
    [wanted] = ap.desired(MODE, {})
    stored = copy.deepcopy(wanted)
    stored["spec"]["paramRef"] = {"name": "old", "parameterNotFoundAction": "Allow"}
    assert len(ap.changes([wanted], [stored]).replace) == 1


def test_a_new_owner_uid_is_a_change() -> None:
    """After `helm uninstall` and a new install the policy has a new uid: a binding still
    owned by the old one would be garbage-collected under us."""
    [wanted] = ap.desired(MODE, {})
    stored = copy.deepcopy(wanted)
    stored["metadata"]["ownerReferences"][0]["uid"] = "uid-0"
    assert len(ap.changes([wanted], [stored]).replace) == 1


def test_the_marked_pods_of_runs_anchored_before_a_namespace_was_switched_off_keep_a_binding() -> None:
    """Listed by name (the enabled namespaces, and those switched off while an anchored run
    lives), for the pods that carry a run's mark: no moment between the default binding and
    this one when a namespace is switched off; never our own namespace or kube-system."""
    held = {"team-a", "team-off", "kube-system"}
    default, anchored = ap.desired(MODE, {}, held=held)
    assert default["metadata"]["name"] == "tcs-tekton-coscheduler-default"
    assert anchored["metadata"]["name"] == "tcs-tekton-coscheduler-anchored"
    assert anchored["spec"]["policyName"] == "tcs-tekton-coscheduler"
    assert anchored["spec"]["matchResources"] == {
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-off"]}]},
        "objectSelector": {"matchExpressions": [
            {"key": "tekton-coscheduler.dev/anchored", "operator": "Exists"}]},
    }
    assert ap.held_by([default, anchored], MODE) == {"team-a", "team-off"}
    assert ap.held_by([default], MODE) == set()
