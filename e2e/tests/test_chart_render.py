"""The chart as rendered by a real helm: lint, schema, manifests valid, and no drift from the code.

No cluster needed; helm comes from e2e/build.sh like the control plane."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from controller.faces import webhook
from controller.kube import access
from controller.settings import ENV_PREFIX, Settings
from e2e.harness import chart

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


COMBINATIONS = {
    "defaults": {},
    "cert-manager-self-signed": {"webhook.tls.mode": "certManager"},
    "cert-manager-issuer": {"webhook.tls.mode": "certManager",
                            "webhook.tls.certManager.issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
    "existing-secret": {"webhook.tls.mode": "secret", "webhook.tls.existingSecret": "my-tls",
                        "webhook.tls.caBundle": base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()},
    "policy-mode": {"admission.mode": "policy"},
    "one-replica-monitored": {"replicaCount": 1, "metrics.serviceMonitor.enabled": True,
                              "metrics.prometheusRule.enabled": True,
                              "webhook.failurePolicy": "Ignore"},
    "tuned": {"config.isolation": "required", "config.topologyKey": "topology.kubernetes.io/zone",
              "config.balloon.priorityClassName": "ci-anchors",
              "config.balloon.tolerations": [{"key": "ci", "operator": "Exists"}],
              "nodeSelector": {"pool": "system"}, "priorityClassName": "system-cluster-critical",
              "image.digest": "sha256:" + "a" * 64},
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
                            "Role", "RoleBinding", "Secret", "Service", "ServiceAccount"])
    assert one(docs, "Deployment")["spec"]["replicas"] == 2
    reservation = one(docs, "PriorityClass")  # capacity-aware anchoring's reservation pods
    assert (reservation["value"], reservation["preemptionPolicy"]) == (-5, "Never")
    assert not reservation.get("globalDefault")


def test_webhook_configuration_as_the_issue_asks() -> None:
    docs = chart.render()
    hook, anchored = one(docs, "MutatingWebhookConfiguration")["webhooks"]
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


def test_policy_mode_uses_the_chart_topology_key_as_the_default() -> None:
    docs = chart.render({"admission.mode": "policy", "config.topologyKey": "topology.kubernetes.io/zone"})
    policy, custom = ({v["name"]: v["expression"] for v in p["spec"]["variables"]}
                      for p in by_kind(docs, "MutatingAdmissionPolicy"))
    # (an anchored run's pods keep the key the run was anchored with, from its mark)
    assert policy["topologyKey"] == (
        "variables.anchoredKey != '' ? variables.anchoredKey : 'topology.kubernetes.io/zone'")
    assert custom["topologyKey"].count("'topology.kubernetes.io/zone'") == 2


def test_the_alert_rules_read_metrics_the_controller_serves() -> None:
    import re

    from controller.metrics import Metrics

    docs = chart.render({"metrics.prometheusRule.enabled": True})
    rules = one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"]
    served = {m.name for m in Metrics().registry.collect()}
    for rule in rules:
        for name in re.findall(r"tekton_coscheduler_[a-z_]+", rule["expr"]):
            assert name in served, f"{rule['alert']} reads {name}, which nothing serves"
    assert "PrometheusRule" not in {d["kind"] for d in chart.render()}  # off by default


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


def test_rbac_is_exactly_what_the_operator_needs() -> None:
    docs = chart.render()
    granted: dict[str, set[tuple[str, str, str]]] = {"cluster": set(), "tekton": set(), "own": set()}
    for kind, scope_of in (("ClusterRole", lambda d: "cluster"),
                           ("Role", lambda d: "tekton" if d["metadata"]["namespace"] == "tekton-pipelines" else "own")):
        for role in by_kind(docs, kind):
            for rule in role["rules"]:
                for field in ("apiGroups", "resources", "verbs"):
                    assert "*" not in rule[field], f"wildcard in {role['metadata']['name']}"
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        for v in rule["verbs"]:
                            granted[scope_of(role)].add((g, r, v))
    needed: dict[str, set[tuple[str, str, str]]] = {"cluster": set(), "tekton": set(), "own": set()}
    for need in access.REQUIRED:
        needed[need.scope] |= {(need.group, need.resource, v) for v in need.verbs}
    assert granted == needed


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


def test_readme_documents_every_value() -> None:
    def leaves(node: Any, prefix: str = "") -> set[str]:
        if isinstance(node, dict) and node:
            out: set[str] = set()
            for key, value in node.items():
                out |= leaves(value, f"{prefix}{key}.")
            return out
        return {prefix.rstrip(".")}

    values = yaml.safe_load((chart.CHART / "values.yaml").read_text())
    readme = (chart.REPO / "docs" / "user-guide" / "chart-values.md").read_text()
    section = readme.split("### Chart values", 1)[1].split("\n## ", 1)[0]
    documented = {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}
    assert documented == leaves(values)


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
