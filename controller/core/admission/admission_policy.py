"""Pure: the MutatingAdmissionPolicyBindings that make the chart's MutatingAdmissionPolicies
act as the webhook does (policy mode), and the changes that get them there.

The chart installs two static policies from one body: `<name>`, with the chart's default
topology key and no parameter, and `<name>-custom`, whose parameter kind is CoschedulingPolicy;
the bindings are ours. A default binding to the first serves every enabled namespace with the
default key. A namespace whose CoschedulingPolicy sets another key gets a binding of its own to
the second, naming that policy (the one `policy.resolve` picks: the oldest, as the webhook
does), and the default binding leaves it out. Two policies, because a policy with a parameter
kind goes unapplied for up to 30 s after every kube-apiserver start (its RESTMapper finds the
CRD at its next reset; measured by e2e/tests/test_chaos.py): most namespaces never need one.
A binding per namespace, not a parameter selected from the request's namespace: with a
selector the API server skips the policy where a namespace has no CoschedulingPolicy, and runs
it once per policy, in random order, where it has two (measured on 1.36.3, see
docs/design/admission.md). Tekton's own assistant, on or off, changes none of them: in an
opted-in namespace the policy serves its placeholders and the pods it pins.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.basics import names
from controller.core.policy.policy import PolicyResolution

API_VERSION = "admissionregistration.k8s.io/v1"
POLICY_KIND = "MutatingAdmissionPolicy"
BINDING_KIND = "MutatingAdmissionPolicyBinding"
BINDING_SELECTOR = f"{names.LABEL_MANAGED_BY}={names.APP}"
NAMESPACE_NAME = "kubernetes.io/metadata.name"
POLICY_SOURCE = "CoschedulingPolicy/"
CUSTOM_SUFFIX = "-custom"


@dataclass(frozen=True)
class PolicyMode:
    """What the bindings depend on besides the namespaces' policies."""

    policy_name: str
    policy_uid: str
    namespace_label: str
    namespace_label_value: str
    # Never mutated, as the webhook's namespaceSelector: our own namespace and kube-system.
    excluded_namespaces: tuple[str, ...]
    default_topology_key: str
    # admissionregistration.k8s.io/v1 from 1.36; v1beta1 where 1.34 or 1.35 serve it.
    api_version: str = API_VERSION
    # The policy with a CoschedulingPolicy parameter; "" where it is not installed, and then
    # every namespace keeps the default binding.
    custom_policy_uid: str = ""

    @property
    def custom_policy_name(self) -> str:
        return self.policy_name + CUSTOM_SUFFIX


def overrides(
    resolutions: Mapping[str, PolicyResolution], default_topology_key: str
) -> dict[str, str]:
    """Namespace -> the CoschedulingPolicy that sets its topology key, where that key is not
    the default. A policy that cannot be used leaves its namespace to the default binding."""
    out = {}
    for namespace, resolution in resolutions.items():
        chosen = resolution.policy
        if (
            chosen.source.startswith(POLICY_SOURCE)
            and chosen.topology_key != default_topology_key
        ):
            out[namespace] = chosen.source.removeprefix(POLICY_SOURCE)
    return out


def default_binding_name(mode: PolicyMode) -> str:
    return f"{mode.policy_name}-default"


def namespace_binding_name(mode: PolicyMode, namespace: str) -> str:
    return f"{mode.policy_name}-ns-{namespace}"


def anchored_binding_name(mode: PolicyMode) -> str:
    return f"{mode.policy_name}-anchored"


def desired(
    mode: PolicyMode,
    overridden: Mapping[str, str],
    held: Collection[str] = (),
) -> list[dict[str, Any]]:
    """The bindings that should exist, in a stable order.

    `held`: the namespaces where runs anchored by the operator may still make pods, that is the
    enabled ones and those switched off while such a run lives (core/placement/mark.py). A binding
    to the default policy serves there the pods that carry a run's mark, whatever the namespace's
    label says: listed by name, so that switching a namespace off leaves no moment between the
    default binding and this one, and namespaces this installation never served are not
    touched."""
    enabled = {
        "key": mode.namespace_label,
        "operator": "In",
        "values": [mode.namespace_label_value],
    }
    excluded = sorted(set(mode.excluded_namespaces))
    if not mode.custom_policy_uid:
        overridden = {}
    out = [
        _binding(
            mode,
            default_binding_name(mode),
            (mode.policy_name, mode.policy_uid),
            [enabled, _names("NotIn", sorted({*excluded, *overridden}))],
            None,
        )
    ]
    kept = sorted(set(held) - set(excluded))
    if kept:
        out.append(
            _binding(
                mode,
                anchored_binding_name(mode),
                (mode.policy_name, mode.policy_uid),
                [_names("In", kept)],
                None,
                objects={"matchExpressions": [{"key": names.LABEL_ANCHORED, "operator": "Exists"}]},
            )
        )
    for namespace in sorted(overridden):
        if namespace in excluded:
            continue
        out.append(
            _binding(
                mode,
                namespace_binding_name(mode, namespace),
                (mode.custom_policy_name, mode.custom_policy_uid),
                [enabled, _names("In", [namespace])],
                {"name": overridden[namespace], "parameterNotFoundAction": "Allow"},
            )
        )
    return out


def _names(operator: str, values: Sequence[str]) -> dict[str, Any]:
    return {"key": NAMESPACE_NAME, "operator": operator, "values": list(values)}


def _binding(
    mode: PolicyMode,
    name: str,
    policy: tuple[str, str],  # (name, uid) of the policy bound, its owner
    expressions: list[dict[str, Any]],
    param_ref: Mapping[str, Any] | None,
    objects: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "policyName": policy[0],
        "matchResources": {"namespaceSelector": {"matchExpressions": expressions}},
    }
    if objects is not None:
        spec["matchResources"]["objectSelector"] = dict(objects)
    if param_ref is not None:
        spec["paramRef"] = dict(param_ref)
    return {
        "apiVersion": mode.api_version,
        "kind": BINDING_KIND,
        "metadata": {
            "name": name,
            "labels": {names.LABEL_MANAGED_BY: names.APP, names.LABEL_NAME: names.APP},
            # The policy is Helm's; uninstalling it takes our bindings with it.
            "ownerReferences": [
                {
                    "apiVersion": mode.api_version,
                    "kind": POLICY_KIND,
                    "name": policy[0],
                    "uid": policy[1],
                }
            ],
        },
        "spec": spec,
    }


def held_by(existing: Sequence[Mapping[str, Any]], mode: PolicyMode) -> set[str]:
    """The namespaces the existing anchored binding holds (kept while the operator does not
    know its live runs yet, just after it started to lead)."""
    for binding in existing:
        if _name(binding) == anchored_binding_name(mode):
            selector = ((binding.get("spec") or {}).get("matchResources") or {}).get(
                "namespaceSelector") or {}
            for expr in selector.get("matchExpressions") or []:
                if expr.get("key") == NAMESPACE_NAME and expr.get("operator") == "In":
                    return {str(v) for v in expr.get("values") or []}
    return set()


@dataclass(frozen=True)
class Changes:
    create: tuple[dict[str, Any], ...] = ()
    # (desired, resourceVersion of the existing one)
    replace: tuple[tuple[dict[str, Any], str], ...] = ()
    delete: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.create or self.replace or self.delete)


def changes(
    wanted: Sequence[Mapping[str, Any]], existing: Sequence[Mapping[str, Any]]
) -> Changes:
    """What to create, replace and delete so that our bindings are exactly `wanted`. Only
    bindings labelled as ours are ever touched (the caller lists them by that label)."""
    have = {_name(b): b for b in existing}
    want = {_name(b): b for b in wanted}
    create = tuple(dict(b) for name, b in want.items() if name not in have)
    replace = tuple(
        (dict(b), str((have[name].get("metadata") or {}).get("resourceVersion") or ""))
        for name, b in want.items()
        if name in have and not _same(b, have[name])
    )
    delete = tuple(sorted(name for name in have if name not in want))
    return Changes(create, replace, delete)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _same(wanted: Mapping[str, Any], existing: Mapping[str, Any]) -> bool:
    """Equal where we set something: the spec (the API server adds defaults such as
    matchResources.matchPolicy, so only our fields are compared; a paramRef we no longer set
    must go), our labels, and the owner."""
    meta, have_meta = wanted.get("metadata") or {}, existing.get("metadata") or {}
    want_spec, have_spec = wanted.get("spec") or {}, existing.get("spec") or {}
    if ("paramRef" in have_spec) != ("paramRef" in want_spec):
        return False
    owners = [(o.get("uid"), o.get("name")) for o in have_meta.get("ownerReferences") or []]
    wanted_owners = [(o.get("uid"), o.get("name")) for o in meta.get("ownerReferences") or []]
    return (
        _contains(have_spec, want_spec)
        and _contains(have_meta.get("labels") or {}, meta.get("labels") or {})
        and owners == wanted_owners
    )


def _contains(have: Any, want: Any) -> bool:
    """`have` holds every field of `want` with the same value; extra fields in `have` are the
    API server's defaults."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_contains(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(have) == len(want)
            and all(_contains(h, w) for h, w in zip(have, want, strict=True))
        )
    return bool(have == want)
