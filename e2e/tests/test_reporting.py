"""What the operator says, and when it holds back: Events, metrics, policies, Tekton's flag."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client

from controller.core.basics import names
from controller.core.placement import budget
from e2e.harness.cluster import ClusterHandle, name_of, present, read_versions
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.scenario import Scenario

pytestmark = pytest.mark.e2e

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
POLICY = ("tekton-coscheduler.dev", "v1alpha1")



def wait_event(s: Scenario, reason: str, timeout: float = 30) -> client.CoreV1Event:
    event: client.CoreV1Event = s.cluster.wait_for(lambda: s.events(reason), timeout=timeout, what=f"Event {reason}")[0]
    return event


def ready_condition(s: Scenario, name: str) -> dict[str, str] | None:
    obj = cast(dict[str, Any], s.custom.get_namespaced_custom_object(*POLICY, s.ns, "coschedulingpolicies", name))
    conds = (obj.get("status") or {}).get("conditions") or []
    ready: dict[str, str] | None = next((c for c in conds if c["type"] == "Ready"), None)
    return ready


def test_pod_bound_elsewhere_is_counted_as_misplaced(enabled: Scenario, nodes: list[str],
                                                    coscheduler: Coscheduler) -> None:
    s = enabled
    run = s.run(workspaces=[{"name": "w", "emptyDir": {}}])
    anchor = s.balloon_node(run)
    other = next(n for n in nodes if n != anchor)
    before = coscheduler.metric("tekton_coscheduler_misplaced_pods_total")
    pod = s.task_pod(run, "rogue", claims=())
    assert s.pod_node(pod) == anchor  # the real scheduler honours the term...
    rogue = s.task_pod(run, "preset", claims=())
    s.core.delete_namespaced_pod(rogue, s.ns, grace_period_seconds=0)
    s.cluster.wait_for(lambda: not [p for p in s.core.list_namespaced_pod(s.ns).items
                                    if name_of(p) == rogue], timeout=30, what="pod deleted")
    # ...so a misplaced pod can only come from outside it: a pod created with nodeName set.
    body = s.pod(pod)
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        body["metadata"].pop(key, None)
    body["metadata"]["name"] = rogue
    body["metadata"]["labels"]["tekton.dev/taskRunUID"] = str(uuid.uuid4())
    body["spec"]["nodeName"] = other
    body.pop("status", None)
    s.core.create_namespaced_pod(s.ns, body)  # type: ignore[arg-type]
    s.cluster.wait_for(lambda: coscheduler.metric("tekton_coscheduler_misplaced_pods_total") > before,
                       timeout=30, what="misplaced pod counted")
    assert other in present(wait_event(s, "PodMisplaced").message)


def test_balloon_no_node_fits_is_said_at_once(enabled: Scenario, coscheduler: Coscheduler) -> None:
    s = enabled
    run = s.run(workspaces=[{"name": "w", "emptyDir": {}}], pod_template={"nodeSelector": {"pool": "nowhere"}})
    event = wait_event(s, "BalloonUnschedulable", timeout=20)
    assert "node" in present(event.message) and event.type == "Warning"
    assert coscheduler.metric("tekton_coscheduler_balloon_problems_total", reason="unschedulable") >= 1
    s.finish(run)


def test_a_balloon_pod_the_quota_refuses_is_said_with_the_quota_s_words(enabled: Scenario) -> None:
    """The StatefulSet is made but its controller may not make the pod: its FailedCreate is
    the why (a StatefulSet merely slow to make one, as in a burst, is not said)."""
    s = enabled
    s.core.create_namespaced_resource_quota(s.ns, {"metadata": {"name": "no-pods"},  # type: ignore[arg-type]
                                                   "spec": {"hard": {"pods": "0"}}})
    s.cluster.wait_for(lambda: present(s.core.read_namespaced_resource_quota("no-pods", s.ns).status).hard,
                       timeout=30, what="quota counted")
    s.run(workspaces=[{"name": "w", "emptyDir": {}}])
    event = wait_event(s, "BalloonNotPlaced", timeout=60)
    assert "exceeded quota" in present(event.message) and "the run's pods wait" in present(event.message)


def test_a_budget_of_another_s_holding_our_name_is_said_on_the_run(enabled: Scenario) -> None:
    """Somebody's PodDisruptionBudget took the name of the namespace's budget for balloons:
    ours cannot be made, and the run is told (a drain may evict its anchor)."""
    s = enabled
    client.PolicyV1Api(s.core.api_client).create_namespaced_pod_disruption_budget(s.ns, {  # type: ignore[arg-type]
        "metadata": {"name": budget.NAME},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    run = s.run(workspaces=[{"name": "w", "emptyDir": {}}])
    event = wait_event(s, "BalloonUnprotected", timeout=30)
    assert "did not make" in present(event.message) and event.type == "Warning"
    s.finish(run)


def refused_statefulset(s: Scenario) -> bool:
    sts = {"metadata": {"name": "probe"}, "spec": {
        "selector": {"matchLabels": {"app": "probe"}},
        "template": {"metadata": {"labels": {"app": "probe"}},
                     "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}
    try:
        s.apps.create_namespaced_stateful_set(s.ns, sts, dry_run="All")  # type: ignore[arg-type]
    except client.ApiException as exc:
        return bool(exc.status == 403)  # the client leaves `status` untyped
    return False


def test_balloon_refused_by_quota_is_said(enabled: Scenario, coscheduler: Coscheduler) -> None:
    s = enabled
    s.core.create_namespaced_resource_quota(s.ns, {"metadata": {"name": "no-statefulsets"},  # type: ignore[arg-type]
                                                   "spec": {"hard": {"count/statefulsets.apps": "0"}}})
    # Quota admission reads quotas from its own cache: until it has this one, a StatefulSet
    # would still be made. A dry run tells when it has it.
    s.cluster.wait_for(lambda: refused_statefulset(s), timeout=30, what="the quota enforced")
    run = s.run(workspaces=[{"name": "w", "emptyDir": {}}])
    event = wait_event(s, "BalloonCreateFailed")
    assert "403" in present(event.message) and "quota" in present(event.message).lower()
    assert s.balloons(run) == []


def test_policy_topology_key_reaches_the_pods_and_status_is_reported(enabled: Scenario, nodes: list[str]) -> None:
    s = enabled
    s.policy("zone", {"topologyKey": "topology.kubernetes.io/zone", "isolation": "none"})
    s.cluster.wait_for(lambda: (ready_condition(s, "zone") or {}).get("status") == "True",
                       timeout=20, what="policy Ready=True")
    time.sleep(1.1)  # creation times have whole seconds; a tie would go by name ("second" first)
    s.policy("second", {"isolation": "required"})
    cond = s.cluster.wait_for(lambda: ready_condition(s, "second"), timeout=20, what="second policy status")
    assert (cond["status"], cond["reason"]) == ("False", "Superseded")
    run = s.run(workspaces=[{"name": "w", "emptyDir": {}}])
    anchor = s.balloon_node(run)
    zone = present(present(s.core.read_node(anchor).metadata).labels)["topology.kubernetes.io/zone"]

    def patched_term() -> list[dict[str, object]] | None:
        pod = s.task_pod(run, f"t{uuid.uuid4().hex[:4]}", claims=())
        term: list[dict[str, object]] | None = s.pod(pod)["spec"]["affinity"]["podAffinity"][REQ]
        return term

    terms = s.cluster.wait_for(patched_term, timeout=10, what="pod with a term")
    assert terms[0]["topologyKey"] == "topology.kubernetes.io/zone"
    pods = [p for p in s.core.list_namespaced_pod(s.ns, label_selector="tekton.dev/taskRun").items]
    bound = [s.pod_node(name_of(p)) for p in pods]
    assert {present(present(s.core.read_node(n).metadata).labels)["topology.kubernetes.io/zone"] for n in bound} == {zone}


def test_isolation_required_keeps_two_runs_apart(enabled: Scenario, nodes: list[str]) -> None:
    s = enabled
    s.policy("apart", {"isolation": "required"})
    # Ready once the operator's own view holds it (operator/policies.py): in effect for the next.
    s.cluster.wait_for(lambda: (ready_condition(s, "apart") or {}).get("status") == "True",
                       timeout=20, what="policy Ready=True")
    runs = [s.run(name=f"r{i}", workspaces=[{"name": "w", "emptyDir": {}}]) for i in range(2)]
    anchors = [s.balloon_node(r) for r in runs]
    assert anchors[0] != anchors[1]


def test_pending_run_is_anchored_only_once_started(enabled: Scenario) -> None:
    s = enabled
    body_spec_status = "PipelineRunPending"
    run = cast(dict[str, Any], s.custom.create_namespaced_custom_object("tekton.dev", "v1", s.ns, "pipelineruns", {
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "metadata": {"name": "later"},
        "spec": {"status": body_spec_status, "pipelineRef": {"name": "p"},
                 "workspaces": [{"name": "w", "emptyDir": {}}]}}))
    time.sleep(3)
    assert s.balloons(run) == []
    s.custom.patch_namespaced_custom_object("tekton.dev", "v1", s.ns, "pipelineruns", "later",
                                            {"spec": {"status": None}})  # merge patch: null removes
    s.wait_balloon(run)


def test_label_removed_mid_run_keeps_the_balloon_until_the_run_ends(enabled: Scenario) -> None:
    s = enabled
    run = s.run(workspaces=[{"name": "w", "emptyDir": {}}])
    s.balloon_node(run)
    s.core.patch_namespace(s.ns, {"metadata": {"labels": {names.NAMESPACE_LABEL: None}}})
    time.sleep(3)
    assert len(s.balloons(run)) == 1
    later = s.run(name="after-label-removed", workspaces=[{"name": "w", "emptyDir": {}}])
    time.sleep(3)
    assert s.balloons(later) == []
    s.finish(run)
    s.wait_no_balloon(run, timeout=30)  # finished off by the resync (5 s here)


ENABLED = "tekton_coscheduler_tekton_affinity_assistant_enabled"
MODE = "tekton_coscheduler_tekton_affinity_assistant_mode"


def check(coscheduler: Coscheduler) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("tekton-coscheduler")
    # The operator runs here with the kubeconfig's own credentials, not as a ServiceAccount:
    # --as-caller reviews those.
    return subprocess.run([str(exe), "check", "--as-caller"], env=coscheduler.env(),
                          capture_output=True, text=True, timeout=60)


def test_tekton_assistant_on_is_no_warning_and_an_opted_in_namespace_s_runs_are_still_ours(
    cluster: ClusterHandle, enabled: Scenario, coscheduler: Coscheduler
) -> None:
    """Issue 48 (beside Tekton's assistant): with the assistant on, admission still serves an
    opted-in namespace (policy mode: the bindings stay) and its runs get their balloon. The
    mode is a metric, `check` is ready and says what it means, and no Warning is posted."""
    s = enabled
    tekton_cluster.configure(cluster, {"coschedule": "workspaces"})
    try:
        cluster.wait_for(lambda: coscheduler.metric(MODE, mode="workspaces") == 1,
                         timeout=20, what="the assistant's mode metric")
        assert coscheduler.metric(ENABLED) == 1
        assert coscheduler.metric(MODE, mode="disabled") == 0
        run = s.run(workspaces=[{"name": "w", "emptyDir": {}}])
        assert s.pinned_now(run)
        if coscheduler.env()["COSCHEDULER_ADMISSION_MODE"] == "policy":
            assert coscheduler.metric("tekton_coscheduler_admission_policy_bindings") > 0
        s.wait_balloon(run, timeout=20)
        out = check(coscheduler)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "[  ok] tekton affinity assistant: on, mode workspaces: " in out.stdout
        assert ("[  ok] tekton assistant, opted-in namespaces: tekton-coscheduler anchors each "
                "run") in out.stdout
        assert "[  ok] tekton assistant, tekton's limit: " in out.stdout
        assert "verdict: ready" in out.stdout
        # By now the Warning of old had long been posted (at the switch, before the run).
        said = [e.reason for e in s.core.list_namespaced_event(tekton_cluster.NAMESPACE).items
                if e.reason == "TektonAffinityAssistantOn"]
        assert said == []
    finally:
        tekton_cluster.configure(cluster, None)
    cluster.wait_for(lambda: coscheduler.metric(MODE, mode="disabled") == 1,
                     timeout=20, what="assistant off again")
    assert coscheduler.metric(ENABLED) == 0 and coscheduler.metric(MODE, mode="workspaces") == 0
    assert s.pinned_now(run)


@pytest.mark.matrix
def test_check_command_gives_a_verdict(cluster: ClusterHandle, coscheduler: Coscheduler) -> None:
    out = check(coscheduler)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "verdict: ready" in out.stdout
    if tekton_cluster.AS_SHIPPED:  # the matrix's cell on Tekton's defaults: its assistant on
        assert "[  ok] tekton affinity assistant: on, mode workspaces: " in out.stdout
    else:
        assert "tekton affinity assistant: off" in out.stdout
    pins = read_versions()
    assert f"[  ok] kubernetes version: Kubernetes {pins['KUBERNETES_VERSION']}: tested" in out.stdout
    assert (f"[  ok] tekton version: Tekton Pipelines {pins['TEKTON_PIPELINE_VERSION']}: tested"
            in out.stdout)


def test_check_from_a_workstation_reviews_the_operator_s_service_account(
        cluster: ClusterHandle, coscheduler: Coscheduler) -> None:
    """An administrator's own credentials, not the operator's: `check` asks the API server what
    the operator's ServiceAccount may do (SubjectAccessReview), and names what it may not."""
    from e2e.harness import chart

    exe = Path(sys.executable).with_name("tekton-coscheduler")
    env = {**coscheduler.env(), "KUBECONFIG": str(cluster.kubeconfig)}

    def check(account: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(exe), "check", "--operator-namespace", chart.NAMESPACE,
                               "--service-account", account],
                              env=env, capture_output=True, text=True, timeout=60)

    charts_own = f"{chart.RELEASE}-tekton-coscheduler"
    out = check(charts_own)
    assert (f"every permission the operator needs is granted to ServiceAccount "
            f"{chart.NAMESPACE}/{charts_own}") in out.stdout, out.stdout + out.stderr
    assert "(the caller)" not in out.stdout and "SelfSubjectAccessReview" not in out.stdout
    assert out.returncode == 0, out.stdout + out.stderr

    bare = f"bare-{uuid.uuid4().hex[:6]}"
    with cluster.api_client() as api:
        client.CoreV1Api(api).create_namespaced_service_account(
            chart.NAMESPACE, {"metadata": {"name": bare}})  # type: ignore[arg-type]
    out = check(bare)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"denied to ServiceAccount {chart.NAMESPACE}/{bare}" in out.stdout
    assert "verdict: NOT READY" in out.stdout

    out = check("no-such-account")
    assert out.returncode == 1 and "not found" in out.stdout, out.stdout + out.stderr
