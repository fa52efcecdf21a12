"""The chart as rendered by a real helm: lint, schema, manifests valid, and no drift from the code.

No cluster needed; helm comes from e2e/build.sh like the control plane."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from controller.faces import webhook
from controller.kube import access
from controller.metrics import Metrics
from controller.settings import ENV_PREFIX, Settings
from e2e.harness import chart
from tests import factories, promql

pytestmark = pytest.mark.parts("helm")  # waited for: these run first, as build.sh makes it

BUILTIN = {"v1", "apps/v1", "rbac.authorization.k8s.io/v1", "policy/v1",
           "admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "scheduling.k8s.io/v1"}


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = by_kind(docs, kind)
    return found


def env_of(docs: list[dict[str, Any]]) -> dict[str, str]:
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


COMBINATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cert-manager-self-signed": {"webhook.tls.mode": "certManager"},
    "cert-manager-issuer": {"webhook.tls.mode": "certManager",
                            "webhook.tls.certManager.issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
    "existing-secret": {"webhook.tls.mode": "secret", "webhook.tls.existingSecret": "my-tls",
                        "webhook.tls.caBundle": base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()},
    "policy-mode": {"admission.mode": "policy"},
    "one-replica-monitored": {"replicaCount": 1, "metrics.serviceMonitor.enabled": True,
                              "metrics.prometheusRule.enabled": True,
                              "metrics.dashboard.enabled": True,
                              "webhook.failurePolicy": "Ignore"},
    "tuned": {"config.isolation": "required", "config.topologyKey": "topology.kubernetes.io/zone",
              "config.balloon.priorityClassName": "ci-anchors",
              "config.balloon.tolerations": [{"key": "ci", "operator": "Exists"}],
              "nodeSelector": {"pool": "system"}, "priorityClassName": "system-cluster-critical",
              "image.digest": "sha256:" + "a" * 64, "webhook.tls.mode": "controller"},
    # What a cluster's own rules ask of a chart: names, identity, placement, metadata.
    "fitted": {"fullnameOverride": "ci-anchors",
               "podSecurityContext": {"runAsUser": 1000680000, "fsGroup": 1000680000},
               "securityContext": {"readOnlyRootFilesystem": True},
               "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
                            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
               "podAnnotations": {"example.com/team": "platform"}, "podLabels": {"team": "platform"},
               "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "ScheduleAnyway"}]},
}


@pytest.mark.parametrize("values", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_renders_valid_manifests_and_lints(values: dict[str, Any]) -> None:
    docs = chart.render(values)
    for doc in docs:
        if doc["apiVersion"] in BUILTIN:
            kubernetes_validate.validate(doc, "1.36", strict=True)
        else:
            assert doc["apiVersion"] in {"cert-manager.io/v1", "monitoring.coreos.com/v1"}, doc["apiVersion"]
        assert doc["metadata"]["name"]
    lint = chart.run_helm(["lint", "--strict", str(chart.CHART), "--kube-version", chart.KUBE_VERSION,
                           *chart._set_args(values)])
    assert "0 chart(s) failed" in lint.stdout


def test_default_render_has_what_an_install_needs() -> None:
    docs = chart.render()
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == sorted(["ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Deployment",
                            "MutatingWebhookConfiguration", "PodDisruptionBudget", "PriorityClass",
                            "Pod", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount"])
    assert one(docs, "Deployment")["spec"]["replicas"] == 2
    reservation = one(docs, "PriorityClass")  # capacity-aware anchoring's reservation pods
    assert (reservation["value"], reservation["preemptionPolicy"]) == (-5, "Never")
    assert not reservation.get("globalDefault")


def test_webhook_configuration_as_the_issue_asks() -> None:
    docs = chart.render()
    hook, anchored, placeholders = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    assert hook["clientConfig"]["service"]["path"] == webhook.PATH
    assert (hook["sideEffects"], hook["reinvocationPolicy"], hook["failurePolicy"]) == ("None", "IfNeeded", "Fail")
    assert hook["timeoutSeconds"] <= 10
    exprs = {e["key"]: e for e in hook["namespaceSelector"]["matchExpressions"]}
    assert exprs["tekton-coscheduler.dev/enabled"] == {"key": "tekton-coscheduler.dev/enabled",
                                                       "operator": "In", "values": ["true"]}
    assert set(exprs["kubernetes.io/metadata.name"]["values"]) == {chart.NAMESPACE, "kube-system"}
    assert exprs["kubernetes.io/metadata.name"]["operator"] == "NotIn"
    assert {"key": "tekton.dev/pipelineRun", "operator": "Exists"} in hook["objectSelector"]["matchExpressions"]
    # the generated CA signs the served certificate and is the one the API server trusts
    secret = one(docs, "Secret")
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    # the second entry: in the namespaces not opted in, only the pods of runs anchored before
    # their namespace was switched off (they carry the run's mark); otherwise alike
    assert anchored["name"] == "anchored-pods.tekton-coscheduler.dev"
    by_key = {e["key"]: e for e in anchored["namespaceSelector"]["matchExpressions"]}
    assert by_key["tekton-coscheduler.dev/enabled"]["operator"] == "NotIn"
    assert by_key["kubernetes.io/metadata.name"] == exprs["kubernetes.io/metadata.name"]
    assert anchored["objectSelector"]["matchExpressions"] == [
        *hook["objectSelector"]["matchExpressions"],
        {"key": "tekton-coscheduler.dev/anchored", "operator": "Exists"}]
    assert {k: v for k, v in anchored.items() if k not in ("name", "namespaceSelector",
                                                           "objectSelector")} == {
        k: v for k, v in hook.items() if k not in ("name", "namespaceSelector", "objectSelector")}
    # the third: the placeholders of Tekton's assistant in opted-in namespaces (held for their
    # run's anchor: core/admission/admission.py); otherwise alike the first
    assert placeholders["name"] == "placeholders.tekton-coscheduler.dev"
    assert placeholders["namespaceSelector"] == hook["namespaceSelector"]
    assert placeholders["objectSelector"]["matchExpressions"] == [
        {"key": "tekton.dev/pipelineRun", "operator": "Exists"},
        {"key": "app.kubernetes.io/component", "operator": "In", "values": ["affinity-assistant"]}]
    assert {k: v for k, v in placeholders.items() if k not in ("name", "objectSelector")} == {
        k: v for k, v in hook.items() if k not in ("name", "objectSelector")}


SERVES_POLICIES = ("admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
                   "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")


def test_auto_is_policy_mode_where_the_api_server_serves_it_and_then_no_webhook_parts() -> None:
    docs = chart.render(api_versions=SERVES_POLICIES)
    kinds = sorted(d["kind"] for d in docs)
    assert "MutatingAdmissionPolicy" in kinds
    for absent in ("MutatingWebhookConfiguration", "Secret", "Certificate", "Issuer"):
        assert absent not in kinds
    assert [p["name"] for p in one(docs, "Service")["spec"]["ports"]] == ["metrics"]
    env = env_of(docs)
    assert env["COSCHEDULER_ADMISSION_MODE"] == "policy" and env["COSCHEDULER_WEBHOOK_PORT"] == "0"
    policy, custom = by_kind(docs, "MutatingAdmissionPolicy")
    assert env["COSCHEDULER_ADMISSION_POLICY_NAME"] == policy["metadata"]["name"]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]
    # The default path has no parameter kind (one goes unapplied for a while after every API
    # server start); only the policy for namespaces with their own topology key has one.
    assert "paramKind" not in policy["spec"]
    assert custom["metadata"]["name"] == policy["metadata"]["name"] + "-custom"
    assert custom["spec"]["paramKind"] == {"apiVersion": "tekton-coscheduler.dev/v1alpha1",
                                           "kind": "CoschedulingPolicy"}
    for each in (policy, custom):
        assert (each["spec"]["failurePolicy"], each["spec"]["reinvocationPolicy"]) == ("Ignore", "IfNeeded")
    assert policy["spec"]["mutations"] == custom["spec"]["mutations"]
    assert policy["spec"]["matchConditions"] == custom["spec"]["matchConditions"]
    # the guard: the operator's account may bind only these two policies
    [guard] = [g for g in by_kind(docs, "ValidatingAdmissionPolicy")
               if g["metadata"]["name"].endswith("-bindings-guard")]
    expression = guard["spec"]["validations"][0]["expression"]
    assert f"'{policy['metadata']['name']}'" in expression and f"'{custom['metadata']['name']}'" in expression
    # and without the API, auto is webhook mode
    assert "MutatingWebhookConfiguration" in {d["kind"] for d in chart.render()}


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector's matchExpressions against a pod's labels (In, NotIn, Exists)."""
    for e in selector["matchExpressions"]:
        if e["operator"] == "Exists" and e["key"] not in labels:
            return False
        if e["operator"] == "In" and labels.get(e["key"]) not in e["values"]:
            return False
        if e["operator"] == "NotIn" and labels.get(e["key"]) in e["values"]:
            return False
    return True


def test_the_policy_sees_the_pods_the_webhook_s_entries_see() -> None:
    """Both policies see TaskRun pods and the placeholders of Tekton's assistant (as the
    webhook's first and third entries), never a balloon or a pod of no run; the matchConditions
    tell TaskRun pods and placeholders apart (e2e/tests/test_admission_parity.py)."""
    docs = chart.render({"admission.mode": "policy"})
    hooks = one(chart.render(), "MutatingWebhookConfiguration")["webhooks"]
    taskrun, placeholder = factories.taskrun_pod(), factories.placeholder_pod()
    balloon = {**taskrun["metadata"]["labels"], "app.kubernetes.io/managed-by": "tekton-coscheduler"}
    plain = {"app": "web"}
    for policy in by_kind(docs, "MutatingAdmissionPolicy"):
        selector = policy["spec"]["matchConstraints"]["objectSelector"]
        for pod, hook in ((taskrun, hooks[0]), (placeholder, hooks[2])):
            labels = pod["metadata"]["labels"]
            assert _selects(hook["objectSelector"], labels) and _selects(selector, labels)
        assert not _selects(selector, balloon) and not _selects(selector, plain)
        conditions = {c["name"] for c in policy["spec"]["matchConditions"]}
        assert "taskrun-pod-or-placeholder" in conditions
        assert "not-pinned-to-tekton-s-assistant" not in conditions  # swapped, not left


def test_policy_mode_uses_the_chart_topology_key_as_the_default() -> None:
    docs = chart.render({"admission.mode": "policy", "config.topologyKey": "topology.kubernetes.io/zone"})
    policy, custom = ({v["name"]: v["expression"] for v in p["spec"]["variables"]}
                      for p in by_kind(docs, "MutatingAdmissionPolicy"))
    # (an anchored run's pods keep the key the run was anchored with, from its mark)
    assert policy["topologyKey"] == (
        "variables.anchoredKey != '' ? variables.anchoredKey : 'topology.kubernetes.io/zone'")
    assert custom["topologyKey"].count("'topology.kubernetes.io/zone'") == 2


def test_the_alert_rules_read_metrics_the_controller_serves() -> None:
    docs = chart.render({"metrics.prometheusRule.enabled": True})
    rules = one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"]
    exprs = {rule["alert"]: rule["expr"] for rule in rules}
    assert promql.unknown(exprs, Metrics().registry) == {}
    assert "PrometheusRule" not in {d["kind"] for d in chart.render()}  # off by default


def test_every_alert_has_a_runbook_and_the_webhook_alert_is_for_webhook_mode_only() -> None:
    runbooks = "https://example.com/runbooks.md"
    values = {"metrics.prometheusRule.enabled": True,
              "metrics.prometheusRule.runbookUrl": runbooks,
              "metrics.prometheusRule.noLeaderFor": "7m"}
    rules = one(chart.render(values), "PrometheusRule")["spec"]["groups"][0]["rules"]
    by_name = {rule["alert"]: rule for rule in rules}
    for name, rule in by_name.items():
        assert rule["annotations"]["runbook_url"] == f"{runbooks}#{name.lower()}"
    leader = by_name["TektonCoschedulerNoLeader"]
    assert leader["expr"] == "max(tekton_coscheduler_leader) < 1 or absent(tekton_coscheduler_leader)"
    assert (leader["for"], leader["labels"]["severity"]) == ("7m", "critical")
    webhook_rule = by_name["TektonCoschedulerWebhookUnavailable"]
    assert webhook_rule["expr"] == "sum(tekton_coscheduler_ready) < 1 or absent(tekton_coscheduler_ready)"
    assert webhook_rule["for"] == "2m"
    policy = one(chart.render({**values, "admission.mode": "policy"}), "PrometheusRule")
    names = {rule["alert"] for rule in policy["spec"]["groups"][0]["rules"]}
    assert names == set(by_name) - {"TektonCoschedulerWebhookUnavailable"}


def test_no_alert_fires_for_tekton_s_assistant_being_on_its_default() -> None:
    """Beside Tekton's assistant (issue 48): its being on, Tekton's default, is nobody's
    problem, so no rule reads its metrics; in both admission modes."""
    for mode in ("webhook", "policy"):
        rules = one(chart.render({"metrics.prometheusRule.enabled": True, "admission.mode": mode}),
                    "PrometheusRule")["spec"]["groups"][0]["rules"]
        assert len(rules) >= 5
        assert [r["alert"] for r in rules if "assistant" in (r["alert"] + r["expr"]).lower()] == []


def test_the_retired_ignore_assistant_value_is_accepted_and_sets_nothing() -> None:
    """An upgrade with --reuse-values from a release where config.ignoreTektonAssistant was set
    still renders; the variable it once set is gone."""
    for value in (True, False):
        env = env_of(chart.render({"config.ignoreTektonAssistant": value}))
        assert not [k for k in env if "ASSISTANT" in k]


def test_the_dashboard_is_an_optional_configmap_for_grafanas_sidecar() -> None:
    assert "ConfigMap" not in {d["kind"] for d in chart.render()}  # off by default
    shipped = promql.read_dashboard()
    cm = one(chart.render({"metrics.dashboard.enabled": True}), "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == chart.NAMESPACE
    assert json.loads(cm["data"]["tekton-coscheduler.json"]) == shipped
    moved = one(chart.render({"metrics.dashboard.enabled": True,
                              "metrics.dashboard.namespace": "monitoring",
                              "metrics.dashboard.labels": {"dashboards": "tekton"},
                              "metrics.dashboard.annotations": {"grafana_folder": "CI"}}),
                "ConfigMap")
    assert moved["metadata"]["namespace"] == "monitoring"
    # labels given join the default one (Helm merges maps); null removes it
    assert moved["metadata"]["labels"]["dashboards"] == "tekton"
    assert moved["metadata"]["labels"]["grafana_dashboard"] == "1"
    alone = one(chart.render({"metrics.dashboard.enabled": True,
                              "metrics.dashboard.labels": {"grafana_dashboard": None,
                                                           "dashboards": "tekton"}}), "ConfigMap")
    assert "grafana_dashboard" not in alone["metadata"]["labels"]
    assert moved["metadata"]["annotations"] == {"grafana_folder": "CI"}


def test_tls_modes() -> None:
    cm = chart.render(COMBINATIONS["cert-manager-self-signed"])
    assert sorted(d["kind"] for d in cm if d["apiVersion"] == "cert-manager.io/v1") == [
        "Certificate", "Certificate", "Issuer", "Issuer"]
    mwc = one(cm, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].endswith("-webhook")
    assert "caBundle" not in mwc["webhooks"][0]["clientConfig"]
    issuer = chart.render(COMBINATIONS["cert-manager-issuer"])
    (cert,) = [d for d in issuer if d["kind"] == "Certificate"]
    assert cert["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer"}
    existing = chart.render(COMBINATIONS["existing-secret"])
    assert by_kind(existing, "Secret") == []
    volumes = one(existing, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "my-tls"}} in volumes


def test_controller_tls_mode_renders_no_certificate_so_a_re_rendering_changes_nothing() -> None:
    """`generate` makes a new CA at each `helm template` (lookup finds nothing there): the
    GitOps trap. In `controller` mode the rendering holds no key, no certificate and no
    caBundle; the controller keeps them in the Secret its settings name."""
    generated = [one(chart.render(), "Secret")["data"]["ca.crt"] for _ in range(2)]
    assert generated[0] != generated[1]
    first, second = (chart.render({"webhook.tls.mode": "controller"}) for _ in range(2))
    assert first == second
    assert by_kind(first, "Secret") == [] and "Certificate" not in {d["kind"] for d in first}
    hooks = one(first, "MutatingWebhookConfiguration")["webhooks"]
    assert all("caBundle" not in h["clientConfig"] for h in hooks)
    env = env_of(first)
    assert env["COSCHEDULER_WEBHOOK_TLS_SECRET"] == f"{chart.RELEASE}-tekton-coscheduler-webhook-tls"
    assert env["COSCHEDULER_WEBHOOK_CONFIGURATION"] == one(first, "MutatingWebhookConfiguration")["metadata"]["name"]
    assert env["COSCHEDULER_WEBHOOK_CERT_FILE"].startswith("/tmp/")  # the pod's writable emptyDir
    pod = one(first, "Deployment")["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]
    # the grants name the two objects where the verb allows it
    rules = [r for role in by_kind(first, "ClusterRole") + by_kind(first, "Role") for r in role["rules"]
             if r["resources"] in (["secrets"], ["mutatingwebhookconfigurations"])]
    assert sorted((r["resources"][0], tuple(r["verbs"]), tuple(r.get("resourceNames", ()))) for r in rules) == [
        ("mutatingwebhookconfigurations", ("get", "patch"), (f"{chart.RELEASE}-tekton-coscheduler",)),
        ("secrets", ("create",), ()),
        ("secrets", ("get",), (f"{chart.RELEASE}-tekton-coscheduler-webhook-tls",))]
    # policy mode has no webhook: nothing to keep, nothing granted
    policy = chart.render({"webhook.tls.mode": "controller", "admission.mode": "policy"})
    assert env_of(policy)["COSCHEDULER_WEBHOOK_TLS_SECRET"] == ""


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"replicaCount": "two"}, "replicaCount"),
        ({"replicas": 2}, "replicas"),
        ({"config.isolation": "sometimes"}, "isolation"),
        ({"config.unknown": 1}, "unknown"),
        ({"webhook.failurePolicy": "Maybe"}, "failurePolicy"),
        ({"webhook.timeoutSeconds": 60}, "timeoutSeconds"),
        ({"config.balloon.resources": {"cpu": "lots"}}, "cpu"),
        ({"webhook.tls.mode": "secret", "webhook.tls.existingSecret": "x"}, "caBundle"),
        ({"webhook.tls.mode": "secret"}, "existingSecret"),
        ({"image.digest": "latest"}, "digest"),
        ({"extraEnv": [{"value": "no name"}]}, "name"),
        ({"extraEnv": [{"name": "X", "valu": "typo"}]}, "valu"),
        ({"fullnameOverride": "Not_A_Name"}, "fullnameOverride"),
        ({"podSecurityContext": "restricted"}, "podSecurityContext"),
    ],
)
def test_bad_values_are_refused_with_a_reason(values: dict[str, Any], says: str) -> None:
    out = chart.run_helm(["template", "x", str(chart.CHART), "--kube-version", chart.KUBE_VERSION,
                          *chart._set_args(values)], check=False)
    assert out.returncode != 0
    assert says in out.stderr


def test_every_operator_setting_is_a_chart_value(monkeypatch: pytest.MonkeyPatch) -> None:
    env = env_of(chart.render(COMBINATIONS["tuned"]))
    settings = {ENV_PREFIX + n.upper() for n in Settings.model_fields}
    # The Lease's namespace is the pod's own (POD_NAMESPACE from the downward API).
    assert settings - set(env) == {"COSCHEDULER_LEADER_ELECTION_NAMESPACE"}
    assert "POD_NAMESPACE" in env
    assert env["COSCHEDULER_ISOLATION"] == "required"
    assert env["COSCHEDULER_TOPOLOGY_KEY"] == "topology.kubernetes.io/zone"
    assert env["COSCHEDULER_BALLOON_PRIORITY_CLASS_NAME"] == "ci-anchors"
    # and the process accepts what the chart sets, as it would read it from its environment
    for key, value in env.items():
        if key.startswith(ENV_PREFIX):
            monkeypatch.setenv(key, value)
    assert Settings().balloon_tolerations[0].key == "ci"


@pytest.mark.parametrize("tls", ["generate", "controller"])
def test_rbac_is_exactly_what_the_operator_needs(tls: str) -> None:
    docs = chart.render({"webhook.tls.mode": tls})
    granted: dict[str, set[tuple[str, str, str]]] = {"cluster": set(), "tekton": set(), "own": set()}
    scopes: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
        ("ClusterRole", lambda d: "cluster"),
        ("Role", lambda d: "tekton" if d["metadata"]["namespace"] == "tekton-pipelines" else "own"))
    for kind, scope_of in scopes:
        for role in by_kind(docs, kind):
            for rule in role["rules"]:
                for field in ("apiGroups", "resources", "verbs"):
                    assert "*" not in rule[field], f"wildcard in {role['metadata']['name']}"
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        for v in rule["verbs"]:
                            granted[scope_of(role)].add((g, r, v))
    needed: dict[str, set[tuple[str, str, str]]] = {"cluster": set(), "tekton": set(), "own": set()}
    for need in (*access.REQUIRED, *(access.SELF_MANAGED_TLS if tls == "controller" else ())):
        needed[need.scope] |= {(need.group, need.resource, v) for v in need.verbs}
    assert granted == needed


def fixed_ids(node: Any) -> list[str]:
    """Every field anywhere in a manifest that fixes a user or group ID."""
    if isinstance(node, dict):
        return [*(k for k in node if k in ("runAsUser", "runAsGroup", "fsGroup", "supplementalGroups")),
                *(f for v in node.values() for f in fixed_ids(v))]
    if isinstance(node, list):
        return [f for v in node for f in fixed_ids(v)]
    return []


@pytest.mark.parametrize("values", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_no_user_or_group_is_fixed_unless_asked(values: dict[str, Any]) -> None:
    """OpenShift's restricted SCC assigns each namespace's pods a UID of its own range and
    refuses one outside it: the chart fixes none, the image's numeric USER runs elsewhere."""
    docs = chart.render(values, api_versions=SERVES_POLICIES)
    asked = {k for k in values.get("podSecurityContext", {}) if k in ("runAsUser", "runAsGroup", "fsGroup")}
    assert set(fixed_ids(docs)) == asked


def test_security_contexts_are_values_whose_defaults_stay_when_one_is_set() -> None:
    default = one(chart.render(), "Deployment")["spec"]["template"]["spec"]
    assert default["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert default["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]}}
    # as OpenShift would assign (or an administrator pins) a UID: merged with the defaults
    spec = one(chart.render(COMBINATIONS["fitted"]), "Deployment")["spec"]["template"]["spec"]
    assert spec["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"},
                                       "runAsUser": 1000680000, "fsGroup": 1000680000}
    assert spec["containers"][0]["securityContext"] == default["containers"][0]["securityContext"]
    # a default taken away (null), another key added
    spec = one(chart.render({"securityContext": {"readOnlyRootFilesystem": None, "privileged": False}}),
               "Deployment")["spec"]["template"]["spec"]
    assert "readOnlyRootFilesystem" not in spec["containers"][0]["securityContext"]
    assert spec["containers"][0]["securityContext"]["privileged"] is False


def test_names_follow_name_and_fullname_overrides() -> None:
    named = chart.render({"nameOverride": "cosched"})
    assert one(named, "Deployment")["metadata"]["name"] == f"{chart.RELEASE}-cosched"
    assert one(named, "Deployment")["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "cosched"
    docs = chart.render(COMBINATIONS["fitted"])
    ours = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    assert all(d["metadata"]["name"].startswith("ci-anchors") for d in ours), sorted(
        d["metadata"]["name"] for d in ours)
    env = env_of(docs)
    assert env["COSCHEDULER_LEASE_NAME"] == "ci-anchors"
    assert env["COSCHEDULER_RESERVATION_PRIORITY_CLASS_NAME"] == one(docs, "PriorityClass")["metadata"]["name"]
    hook = one(docs, "MutatingWebhookConfiguration")["webhooks"][0]
    assert hook["clientConfig"]["service"]["name"] == one(docs, "Service")["metadata"]["name"] == "ci-anchors"
    for binding in by_kind(docs, "ClusterRoleBinding") + by_kind(docs, "RoleBinding"):
        assert binding["subjects"][0]["name"] == one(docs, "ServiceAccount")["metadata"]["name"]
    assert one(docs, "Secret")["metadata"]["name"] == "ci-anchors-webhook-tls"


def test_extra_env_comes_after_the_chart_s_own_and_replaces_one_of_the_same_name() -> None:
    extra = [*COMBINATIONS["fitted"]["extraEnv"],
             {"name": "COSCHEDULER_LOG_LEVEL", "value": "DEBUG"},
             {"name": "POD_NAME", "value": "fixed"}]
    docs = chart.render({"extraEnv": extra})
    env = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[-4:] == extra
    # each name once: server-side apply (Argo CD, kubectl --server-side) refuses a list whose
    # merge key repeats
    names = [e["name"] for e in env]
    assert len(names) == len(set(names)), names
    assert "COSCHEDULER_ADMISSION_MODE" in names  # the chart's others stay


def test_pod_metadata_priority_and_spread_are_values() -> None:
    docs = chart.render(COMBINATIONS["fitted"] | {"priorityClassName": "system-cluster-critical"})
    template = one(docs, "Deployment")["spec"]["template"]
    assert template["metadata"]["labels"]["team"] == "platform"
    assert template["metadata"]["annotations"]["example.com/team"] == "platform"
    assert "checksum/config" in template["metadata"]["annotations"]
    assert template["spec"]["priorityClassName"] == "system-cluster-critical"
    selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    # a constraint without a selector counts the release's replicas; one with its own keeps it
    assert template["spec"]["topologySpreadConstraints"] == [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": selector}}]
    own = {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"x": "y"}}}
    spec = one(chart.render({"topologySpreadConstraints": [own]}), "Deployment")["spec"]["template"]["spec"]
    assert spec["topologySpreadConstraints"] == [own]
    default = one(chart.render(), "Deployment")["spec"]["template"]
    assert "topologySpreadConstraints" not in default["spec"] and "priorityClassName" not in default["spec"]
    assert set(default["metadata"]["labels"]) == set(selector)


def test_helm_test_runs_check_as_the_operator_with_its_settings() -> None:
    docs = chart.render(COMBINATIONS["fitted"] | {"imagePullSecrets": [{"name": "pull"}]})
    (pod,) = by_kind(docs, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    spec, deployment = pod["spec"], one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    (controller,) = deployment["containers"]
    assert container["args"] == ["check"] and container["image"] == controller["image"]
    assert spec["restartPolicy"] == "Never"  # check's exit status is the test's verdict
    assert spec["serviceAccountName"] == deployment["serviceAccountName"]
    assert spec["automountServiceAccountToken"] is True
    assert container["env"] == controller["env"]  # the same settings, extraEnv included
    assert spec["imagePullSecrets"] == [{"name": "pull"}]
    assert spec["securityContext"] == deployment["securityContext"]
    assert container["securityContext"] == controller["securityContext"]
    # no selector of the controller's (Service, budget, Deployment) takes it for a replica
    selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert not selector.items() <= pod["metadata"]["labels"].items()
    assert not one(docs, "Service")["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


def test_controller_pod_meets_pod_security_restricted() -> None:
    spec = one(chart.render(), "Deployment")["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = spec["containers"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_chart_crds_are_the_repository_crds() -> None:
    ours = {p.name: yaml.safe_load(p.read_text()) for p in (chart.REPO / "crds").glob("*.yaml")}
    shipped = {p.name: yaml.safe_load(p.read_text()) for p in (chart.CHART / "crds").glob("*.yaml")}
    assert ours == shipped


def test_the_chart_readme_documents_every_value() -> None:
    """Every value of values.yaml has its row in the chart's README (or, for a Kubernetes object
    such as podSecurityContext, is inside one). (That the table is what e2e/tools/chart_readme.py
    makes of the current values.yaml, tests/test_chart_docs.py checks.)"""
    def leaves(node: Any, prefix: str = "") -> set[str]:
        if isinstance(node, dict) and node:
            out: set[str] = set()
            for key, value in node.items():
                out |= leaves(value, f"{prefix}{key}.")
            return out
        return {prefix.rstrip(".")}

    values = yaml.safe_load((chart.CHART / "values.yaml").read_text())
    readme = (chart.CHART / "README.md").read_text()
    rows = {line.split("`")[1] for line in readme.splitlines() if line.startswith("| `")}
    undocumented = [leaf for leaf in leaves(values)
                    if not any(leaf == row or leaf.startswith(row + ".") for row in rows)]
    assert undocumented == []


def test_it_renders_as_a_subchart_with_global_values(tmp_path: Path) -> None:
    """An umbrella chart hands its subcharts `global` (and their own values): the schema takes
    it, and stays strict about everything else."""
    import shutil

    umbrella = tmp_path / "platform"
    (umbrella / "charts").mkdir(parents=True)
    (umbrella / "Chart.yaml").write_text(
        "apiVersion: v2\nname: platform\nversion: 1.0.0\ndependencies:\n"
        "  - name: tekton-coscheduler\n    version: '>=0.0.0-0'\n")
    shutil.copytree(chart.CHART, umbrella / "charts" / "tekton-coscheduler")
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "global": {"imageRegistry": "registry.example.com", "storageClass": "fast"},
        "tekton-coscheduler": {"replicaCount": 3}}))
    args = ["template", "p", str(umbrella), "--namespace", "platform", "--kube-version",
            chart.KUBE_VERSION, "-f", str(values)]
    docs = [d for d in yaml.safe_load_all(chart.run_helm(args).stdout) if d]
    assert one(docs, "Deployment")["spec"]["replicas"] == 3
    # and a value of ours mistyped is still refused, as a subchart too
    values.write_text(yaml.safe_dump({"global": {}, "tekton-coscheduler": {"replicas": 3}}))
    refused = chart.run_helm(args, check=False)
    assert refused.returncode != 0 and "replicas" in refused.stderr
    # alone, with a global value given
    alone = chart.render({"global": {"imageRegistry": "registry.example.com"}})
    assert one(alone, "Deployment")["spec"]["replicas"] == 2


def test_an_umbrella_switches_it_with_the_usual_enabled_condition(tmp_path: Path) -> None:
    """`condition: tekton-coscheduler.enabled` is how umbrella charts switch a dependency;
    Helm hands the subchart that `enabled` with its values."""
    import shutil

    umbrella = tmp_path / "platform"
    (umbrella / "charts").mkdir(parents=True)
    (umbrella / "Chart.yaml").write_text(
        "apiVersion: v2\nname: platform\nversion: 1.0.0\ndependencies:\n"
        "  - name: tekton-coscheduler\n    version: '>=0.0.0-0'\n"
        "    condition: tekton-coscheduler.enabled\n")
    shutil.copytree(chart.CHART, umbrella / "charts" / "tekton-coscheduler")
    values = tmp_path / "values.yaml"
    args = ["template", "p", str(umbrella), "--namespace", "platform", "--kube-version",
            chart.KUBE_VERSION, "-f", str(values)]
    values.write_text(yaml.safe_dump({"tekton-coscheduler": {"enabled": True}}))
    on = [d for d in yaml.safe_load_all(chart.run_helm(args).stdout) if d]
    assert one(on, "Deployment")["spec"]["replicas"] == 2
    values.write_text(yaml.safe_dump({"tekton-coscheduler": {"enabled": False}}))
    off = [d for d in yaml.safe_load_all(chart.run_helm(args).stdout) if d]
    assert not [d for d in off if d["kind"] == "Deployment"]
    values.write_text(yaml.safe_dump({"tekton-coscheduler": {"enabled": "yes"}}))
    refused = chart.run_helm(args, check=False)
    assert refused.returncode != 0 and "enabled" in refused.stderr


def test_dockerfile_lints() -> None:
    import shutil
    import subprocess
    import sys

    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    out = subprocess.run([hadolint, str(chart.REPO / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


APP_VERSION = yaml.safe_load((chart.CHART / "Chart.yaml").read_text())["appVersion"]


@pytest.mark.parametrize(("values", "image"), [
    ({}, f"ghcr.io/tekton-coscheduler/tekton-coscheduler:{APP_VERSION}"),
    # a private mirror: the registry alone (a trailing slash forgiven)
    ({"image.registry": "mirror.example:5000/proxy/"},
     f"mirror.example:5000/proxy/tekton-coscheduler:{APP_VERSION}"),
    ({"image.registry": "", "image.repository": "tekton-coscheduler"},
     f"tekton-coscheduler:{APP_VERSION}"),
    ({"image.tag": "dev"}, "ghcr.io/tekton-coscheduler/tekton-coscheduler:dev"),
    ({"image.registry": "r.example", "image.tag": "dev", "image.digest": "sha256:" + "a" * 64},
     "r.example/tekton-coscheduler@sha256:" + "a" * 64),
])
def test_the_image_is_the_registrys_repository_at_the_tag_or_the_digest(
    values: dict[str, Any], image: str,
) -> None:
    container = one(chart.render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == image


@pytest.mark.parametrize("registry", ["https://r.example", "r.example/Team", "r.example:port"])
def test_a_registry_that_is_not_host_port_path_is_refused(registry: str) -> None:
    out = chart.run_helm(["template", "x", str(chart.CHART), "--kube-version", chart.KUBE_VERSION,
                          *chart._set_args({"image.registry": registry})], check=False)
    assert out.returncode != 0
    assert "registry" in out.stderr
