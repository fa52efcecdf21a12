from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics import names
from controller.core.basics.fragments import Resources
from controller.core.model.tekton import Claim, PipelineRun
from controller.core.placement import balloon
from controller.core.policy import policy
from controller.core.policy.policy import Isolation
from controller.settings import Settings
from tests import factories


def build(run_body: dict[str, Any] | None = None, pol: policy.EffectivePolicy | None = None,
          claims: list[Claim] | None = None, tekton_default: dict[str, Any] | None = None,
          ) -> balloon.BalloonPlan:
    run = PipelineRun.from_body(run_body or factories.pipelinerun())
    pol = pol or Settings().default_policy()
    return balloon.plan(run, pol, claims if claims is not None else run.claims(), tekton_default)


@given(st.text(min_size=0, max_size=300))
def test_name_is_valid_and_short_for_any_uid(uid: str) -> None:
    name = balloon.balloon_name(uid)
    assert len(name) <= 52
    assert name == name.lower() and not name.endswith("-")


def test_name_derives_from_uid_so_a_recreated_run_gets_a_new_balloon() -> None:
    assert balloon.balloon_name("a" * 36) != balloon.balloon_name("b" * 36)
    long_name = factories.pipelinerun(name="n" * 253, uid="0f8fad5b-d9cb-469f-a165-70867728950e")
    sts = build(long_name).manifest
    assert len(sts["metadata"]["name"]) <= 52
    assert names.LABEL_RUN not in sts["metadata"]["labels"]  # a 253-char name is no label value
    kubernetes_validate.validate(sts, "1.36", strict=True)


def test_manifest_is_valid_and_restricted(clean_env: pytest.MonkeyPatch) -> None:
    sts = build().manifest
    kubernetes_validate.validate(sts, "1.36", strict=True)
    pod = sts["spec"]["template"]
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    # Restricted, with no user or group of ours: the image's USER, or what the cluster assigns.
    assert spec["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = spec["containers"]
    sc = container["securityContext"]
    assert sc == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                  "readOnlyRootFilesystem": True, "runAsNonRoot": True}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert pod["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
    labels = pod["metadata"]["labels"]
    assert labels == {
        names.LABEL_NAME: names.APP, names.LABEL_COMPONENT: "balloon", names.LABEL_MANAGED_BY: names.APP,
        names.LABEL_RUN: "build-42", names.LABEL_RUN_UID: factories.RUN_UID,
        names.LABEL_BUDGET: names.BUDGET_NAMESPACE,  # its namespace's budget covers it
    }
    (owner,) = sts["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("PipelineRun", factories.RUN_UID, True)
    # the selector matches the pod template, as the API server insists
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_claims_mounted_except_read_write_once_pod() -> None:
    plan = build(claims=[Claim("b"), Claim("a"), Claim("solo", ("ReadWriteOncePod",))])
    vols = plan.manifest["spec"]["template"]["spec"]["volumes"]
    assert [v["persistentVolumeClaim"]["claimName"] for v in vols] == ["a", "b"]
    assert plan.skipped_claims == ("solo",)
    assert balloon.claim_names(plan.manifest) == {"a", "b"}


def test_inherits_tekton_default_and_run_pod_template_run_winning() -> None:
    tekton_default = {"nodeSelector": {"pool": "default"}, "priorityClassName": "tekton-default",
                      "tolerations": [{"key": "tekton", "operator": "Exists"}]}
    run_body = factories.pipelinerun(pod_template={
        "nodeSelector": {"pool": "ci"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]}]}}},
    })
    spec = build(run_body, tekton_default=tekton_default).manifest["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"pool": "ci"}
    assert spec["tolerations"] == [{"key": "tekton", "operator": "Exists"}]
    assert spec["priorityClassName"] == "tekton-default"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]}]


def test_policy_and_pod_node_affinity_are_both_required() -> None:
    base = Settings().default_policy()
    pol = policy.EffectivePolicy(**{**base.__dict__, "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
            {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["nvme"]}]}]}}},
        "priority_class_name": "ours"})
    run_body = factories.pipelinerun(pod_template={"priorityClassName": "theirs", "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["arm64"]}]}]}}}})
    spec = build(run_body, pol).manifest["spec"]["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [[e["values"][0] for e in t["matchExpressions"]] for t in terms] == [["ssd", "arm64"], ["nvme", "arm64"]]
    assert spec["priorityClassName"] == "ours"  # our policy wins where it sets one


def test_conflicting_task_node_selectors_are_reported() -> None:
    run_body = factories.pipelinerun(task_run_specs=[
        {"pipelineTaskName": "build", "podTemplate": {"nodeSelector": {"arch": "amd64"}}},
        {"pipelineTaskName": "test", "podTemplate": {"nodeSelector": {"arch": "arm64"}}},
    ])
    plan = build(run_body)
    assert plan.conflicts and "arch" in plan.conflicts[0]


def test_compatible_task_node_selectors_are_all_required_of_the_balloon() -> None:
    run_body = factories.pipelinerun(task_run_specs=[
        {"pipelineTaskName": "build", "podTemplate": {"nodeSelector": {"gpu": "yes"}}},
    ])
    plan = build(run_body)
    assert plan.conflicts == ()
    assert plan.manifest["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "yes"}


@pytest.mark.parametrize(("isolation", "key"), [
    (Isolation.REQUIRED, "requiredDuringSchedulingIgnoredDuringExecution"),
    (Isolation.PREFERRED, "preferredDuringSchedulingIgnoredDuringExecution"),
])
def test_isolation_is_anti_affinity_between_balloons(isolation: Isolation, key: str) -> None:
    base = Settings().default_policy()
    pol = policy.EffectivePolicy(**{**base.__dict__, "isolation": isolation,
                                    "topology_key": "topology.kubernetes.io/zone"})
    sts = build(pol=pol).manifest
    anti = sts["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][key]
    term = anti[0] if isolation is Isolation.REQUIRED else anti[0]["podAffinityTerm"]
    assert term["topologyKey"] == "topology.kubernetes.io/zone"
    assert term["labelSelector"]["matchExpressions"] == [
        {"key": names.LABEL_RUN_UID, "operator": "NotIn", "values": [factories.RUN_UID]}]
    kubernetes_validate.validate(sts, "1.36", strict=True)


def test_no_isolation_means_no_anti_affinity() -> None:
    assert "affinity" not in build().manifest["spec"]["template"]["spec"]


def test_resources_from_policy() -> None:
    base = Settings().default_policy()
    pol = policy.EffectivePolicy(**{**base.__dict__, "resources": Resources(cpu="100m", memory="64Mi")})
    res = build(pol=pol).manifest["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res == {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
