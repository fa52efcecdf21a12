"""The cluster view's pure parts, and how it swaps whole snapshots on change."""

from __future__ import annotations

from typing import Any

from controller.kube import clusterview
from controller.kube.clusterview import ClusterView, Facts
from controller.settings import Settings


def test_default_pod_template_from_config_defaults() -> None:
    cm = {"data": {"default-pod-template": "nodeSelector:\n  pool: ci\ntolerations:\n- key: ci\n  operator: Exists\n"}}
    assert clusterview.default_pod_template(cm) == {
        "nodeSelector": {"pool": "ci"}, "tolerations": [{"key": "ci", "operator": "Exists"}]}
    assert clusterview.default_pod_template(None) == {}
    assert clusterview.default_pod_template({"data": {"default-pod-template": ": not yaml : ["}}) == {}
    assert clusterview.default_pod_template({"data": {"default-pod-template": "- a list"}}) == {}


def test_policies_resolve_per_namespace() -> None:
    store = {
        "a/p": {"metadata": {"name": "p", "namespace": "a", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"isolation": "required"}},
        "b/p": {"metadata": {"name": "p", "namespace": "b", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"isolation": "bogus"}},
    }
    resolved = clusterview.resolve_policies(Settings(), store)
    assert resolved["a"].policy.isolation == "required"
    assert resolved["b"].policy == Settings().default_policy()
    assert resolved["b"].problems[0].reason == "Invalid"


class NoKube:
    """The view is only fed by its reflectors' callbacks here; nothing is listed."""

    def __getattr__(self, name: str) -> Any:
        return NoKube()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no API calls in this test")


def test_synced_only_when_every_watch_has_listed_once() -> None:
    view = ClusterView(Settings(), NoKube())  # type: ignore[arg-type]
    changes: list[tuple[Facts, Facts]] = []
    view.subscribe(lambda old, new: changes.append((old, new)))
    assert not view.facts.synced and view.facts.assistant_on  # unknown means Tekton's default: on
    view._on_namespaces({"/team-a": {"metadata": {"name": "team-a"}}})
    view._on_policies({})
    assert not view.facts.synced
    view._on_tekton_config({"tekton-pipelines/feature-flags": {"data": {"coschedule": "disabled"}}})
    facts = view.facts
    assert facts.synced and facts.namespace_enabled("team-a") and not facts.assistant_on
    assert facts.topology_key("team-a") == "kubernetes.io/hostname"
    assert len(changes) == 3 and changes[-1][1] is facts
    assert changes[0][0].synced is False  # listeners see the old and the new snapshot


def test_tekton_managed_by_value_comes_from_config_defaults() -> None:
    view = ClusterView(Settings(), NoKube())  # type: ignore[arg-type]
    assert view.facts.tekton_managed_by == "tekton-pipelines"
    view._on_tekton_config({"tekton-pipelines/config-defaults": {
        "data": {"default-managed-by-label-value": "ci-platform"}}})
    assert view.facts.tekton_managed_by == "ci-platform"


def test_a_policy_s_status_alone_is_not_resolved_again_and_its_spec_is() -> None:
    """The leader writes a policy's status on every anchored run that asked for warm caches:
    the status is in the view (warm_status), the resolutions are the same objects."""
    view = ClusterView(Settings(), NoKube())  # type: ignore[arg-type]

    def policy(generation: int, isolation: str, warm: str = "") -> dict[str, Any]:
        return {"a/p": {"metadata": {"name": "p", "namespace": "a", "uid": "u",
                                     "generation": generation,
                                     "creationTimestamp": "2026-01-01T00:00:00Z"},
                        "spec": {"isolation": isolation}, "status": {"warm": warm}}}

    view._on_policies(policy(1, "required"))
    first = view.facts.policies
    view._on_policies(policy(1, "required", warm="node-a"))
    assert view.facts.policies is first
    assert view.facts.warm_status["a"] == {"warm": "node-a"}
    view._on_policies(policy(2, "preferred", warm="node-a"))
    assert view.facts.policies is not first
    assert view.facts.policy_for("a").policy.isolation == "preferred"
