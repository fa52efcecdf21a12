"""The balloon carries exactly what every pod of the run carries (Tekton v1.15's merge)."""

from __future__ import annotations

from typing import Any

from controller.core.basics.fragments import Toleration
from controller.core.model.tekton import PipelineRun
from controller.core.placement import balloon, reconcile, scheduling
from controller.core.policy.policy import EffectivePolicy
from controller.settings import Settings
from tests import factories

CI = {"key": "ci", "operator": "Exists", "effect": "NoSchedule"}
GPU = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def spec_of(body: dict[str, Any], default: dict[str, Any] | None = None,
            policy: EffectivePolicy | None = None) -> tuple[dict[str, Any], balloon.BalloonPlan]:
    plan = balloon.plan(PipelineRun.from_body(body), policy or Settings().default_policy(), [], default)
    return plan.manifest["spec"]["template"]["spec"], plan


def pipeline(*tasks: str) -> dict[str, Any]:
    return {"tasks": [{"name": t, "taskSpec": {"steps": []}} for t in tasks]}


def test_an_empty_field_in_the_runs_template_leaves_the_default_as_tekton_does_in_a_cluster() -> None:
    """Go's merge checks for nil, so `tolerations: []` would count as set; but Tekton's own
    admission webhook drops empty fields before its reconcilers merge (omitempty on a round
    trip), so in a cluster an empty field never overrides the default."""
    default = {"tolerations": [CI], "nodeSelector": {"pool": "ci"}}
    spec, _ = spec_of(factories.pipelinerun(pod_template={"tolerations": [], "nodeSelector": {}}), default)
    assert spec["tolerations"] == [CI] and spec["nodeSelector"] == {"pool": "ci"}
    spec, _ = spec_of(factories.pipelinerun(pod_template={"tolerations": [GPU]}), default)
    assert spec["tolerations"] == [GPU]


def test_a_tasks_tolerations_replace_the_runs_so_the_balloon_keeps_only_those_all_carry() -> None:
    body = factories.pipelinerun(pod_template={"tolerations": [CI, GPU]},
                                 task_run_specs=[{"pipelineTaskName": "build", "podTemplate": {"tolerations": [CI]}}])
    spec, _ = spec_of(body)
    assert spec["tolerations"] == [CI]  # build cannot go where only gpu is tolerated


def test_when_every_task_has_its_own_template_the_runs_is_not_one_of_them() -> None:
    body = factories.pipelinerun(pod_template={"nodeSelector": {"pool": "a"}}, task_run_specs=[
        {"pipelineTaskName": "fetch", "podTemplate": {"nodeSelector": {"pool": "b"}}},
        {"pipelineTaskName": "build", "podTemplate": {"nodeSelector": {"pool": "b", "disk": "ssd"}}}])
    body["spec"]["pipelineSpec"] = pipeline("fetch", "build")
    spec, plan = spec_of(body)
    assert spec["nodeSelector"] == {"pool": "b", "disk": "ssd"} and plan.conflicts == ()
    del body["spec"]["pipelineSpec"]  # tasks unknown: some may use the run's pool=a
    _, plan = spec_of(body)
    assert plan.conflicts


def test_node_affinities_of_all_tasks_are_all_required() -> None:
    zone = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    arch = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["arm64"]}]}]}}}
    body = factories.pipelinerun(pod_template={"affinity": zone},
                                 task_run_specs=[{"pipelineTaskName": "build", "podTemplate": {"affinity": arch}}])
    spec, _ = spec_of(body)
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {e["key"] for e in term["matchExpressions"]} == {"zone", "arch"}


def test_a_policy_toleration_the_pods_lack_is_left_off_the_balloon_and_said() -> None:
    policy = Settings(balloon_tolerations=[Toleration.model_validate(GPU)]).default_policy()
    spec, plan = spec_of(factories.pipelinerun(pod_template={"tolerations": [CI]}), policy=policy)
    assert spec["tolerations"] == [CI] and plan.dropped_tolerations == (GPU,)
    spec, plan = spec_of(factories.pipelinerun(pod_template={"tolerations": [CI, GPU]}), policy=policy)
    assert GPU in spec["tolerations"] and plan.dropped_tolerations == ()
    obs = reconcile.Observed(run=PipelineRun.from_body(factories.pipelinerun(pod_template={"tolerations": [CI]})),
                             namespace_enabled=True, policy=policy,
                             tekton_default_template={}, pvcs=[], balloon=None)
    assert "PolicyTolerationNotCarried" in [n.reason for n in reconcile.decide(obs).notices]


def test_a_common_runtime_class_goes_on_the_balloon_and_differing_ones_are_said() -> None:
    spec, _ = spec_of(factories.pipelinerun(pod_template={"runtimeClassName": "gvisor"}))
    assert spec["runtimeClassName"] == "gvisor"
    body = factories.pipelinerun(pod_template={"runtimeClassName": "gvisor"},
                                 task_run_specs=[{"pipelineTaskName": "b", "podTemplate": {"runtimeClassName": "kata"}}])
    spec, plan = spec_of(body)
    assert "runtimeClassName" not in spec and "RuntimeClasses" in plan.cautions[0]


def test_spreading_and_anti_affinity_in_a_pod_template_are_said() -> None:
    spread = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "x"}}}]
    _, plan = spec_of(factories.pipelinerun(pod_template={"topologySpreadConstraints": spread}))
    assert any("topologySpreadConstraints" in c for c in plan.cautions)


def test_toleration_coverage() -> None:
    assert scheduling.covers({"operator": "Exists"}, CI)
    assert scheduling.covers(CI, {"key": "ci", "value": "x", "effect": "NoSchedule"})
    assert not scheduling.covers({"key": "ci", "value": "x"}, CI)
    assert scheduling.common_tolerations([[{"operator": "Exists"}], [CI]]) == (CI,)


def test_claims_of_pod_template_and_inline_task_volumes_are_the_runs() -> None:
    body = factories.pipelinerun(pod_template={"volumes": [{"name": "cache", "persistentVolumeClaim": {"claimName": "cache"}}]})
    body["spec"]["pipelineSpec"] = {"tasks": [{"name": "t", "taskSpec": {"volumes": [
        {"name": "m", "persistentVolumeClaim": {"claimName": "maven"}}, {"name": "e", "emptyDir": {}}]}}]}
    assert {c.name for c in PipelineRun.from_body(body).claims()} == {"source", "cache", "maven"}


def test_a_run_sharing_a_read_write_once_claim_is_anchored_beside_the_run_that_has_it() -> None:
    from controller.core.model.tekton import Claim

    run = PipelineRun.from_body(factories.pipelinerun())
    others = {"parent-uid": ("source",), "unrelated": ("other",)}
    plan = balloon.plan(run, Settings().default_policy(), [Claim("source", ("ReadWriteOnce",))], None, others)
    terms = plan.manifest["spec"]["template"]["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]
    assert [t["labelSelector"]["matchLabels"]["tekton-coscheduler.dev/pipeline-run-uid"] for t in terms] == ["parent-uid"]
    assert terms[0]["topologyKey"] == "kubernetes.io/hostname" and plan.sharing == ("parent-uid",)
    shared = balloon.plan(run, Settings().default_policy(), [Claim("source", ("ReadWriteMany",))], None, others)
    assert shared.sharing == ()  # many nodes can attach it: no need to share one


def test_isolation_gives_way_to_a_shared_claim_and_says_so() -> None:
    from controller.core.policy.policy import Isolation

    policy = Settings(isolation=Isolation.REQUIRED).default_policy()
    obs = reconcile.Observed(run=PipelineRun.from_body(factories.pipelinerun()), namespace_enabled=True,
                             policy=policy, tekton_default_template={}, pvcs=[],
                             balloon=None, others={"parent-uid": ("source",)})
    decision = reconcile.decide(obs)
    assert "SharedClaimIsolationConflict" in [n.reason for n in decision.notices]
    anti = decision.manifest["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][  # type: ignore[index]
        "requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert "parent-uid" in anti["labelSelector"]["matchExpressions"][0]["values"]
