"""The chart as GitOps installs it: `helm template` rendered, then applied server-side, as Argo
CD and `kubectl apply --server-side` do, sync after sync. In webhook.tls.mode `controller` the
rendering holds no certificate: the replicas make one into its Secret at start (two starting at
once agree on one) and put its CA into the webhook configuration, and a sync changes neither,
so admission keeps working. (`generate` would make a new CA at every rendering: see
test_chart_render.py.)

The replicas run on this host with the release's ServiceAccount token (no containers here), the
webhook configuration pointed at them by URL, as the rest of the suite does."""

from __future__ import annotations

import base64
import ssl
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from kubernetes import client

from e2e.harness import chart
from e2e.harness.cluster import ClusterHandle, present
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.scenario import Scenario

pytestmark = pytest.mark.e2e

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
RELEASE = NAMESPACE = "tcs-gitops"
FULLNAME = f"{RELEASE}-tekton-coscheduler"
SECRET = f"{FULLNAME}-webhook-tls"
LABEL = "e2e.tekton-coscheduler.dev/gitops"
VALUES = {"admission.mode": "webhook", "webhook.tls.mode": "controller",
          "config.namespaceLabel": LABEL}


def replica(cluster: ClusterHandle, name: str) -> Coscheduler:
    """A replica of the release with the settings its chart gives it for its certificate (the
    file paths its own: two share this host)."""
    files = cluster.logs_dir / name / "own-tls"
    settings = {e["name"]: e["value"] for e in rendering(cluster, "")[0]
                if "value" in e and e["name"].startswith("COSCHEDULER_WEBHOOK_")}
    return Coscheduler(cluster, name=name, env_overrides={
        "POD_NAMESPACE": NAMESPACE,
        "COSCHEDULER_NAMESPACE_LABEL": LABEL,
        "COSCHEDULER_WEBHOOK_TLS_SECRET": settings["COSCHEDULER_WEBHOOK_TLS_SECRET"],
        "COSCHEDULER_WEBHOOK_CONFIGURATION": settings["COSCHEDULER_WEBHOOK_CONFIGURATION"],
        "COSCHEDULER_WEBHOOK_CERT_FILE": str(files / "tls.crt"),
        "COSCHEDULER_WEBHOOK_KEY_FILE": str(files / "tls.key"),
    })


def rendering(cluster: ClusterHandle, webhook_url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the controller's env as rendered, the objects a sync applies: `helm template` without
    CRDs or hooks, the webhook pointed at webhook_url)."""
    docs = chart.hooks_left_out(chart.render(VALUES, NAMESPACE, release=RELEASE, crds=False))
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    return env, chart.for_host_replica(docs, webhook_url)


def served(operator: Coscheduler) -> bytes:
    pem = ssl.get_server_certificate(("127.0.0.1", operator.webhook_port))
    return ssl.PEM_cert_to_DER_cert(pem)


def der(pem_b64: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(base64.b64decode(pem_b64).decode())


@dataclass
class GitOps:
    replicas: list[Coscheduler]
    applied: list[dict[str, Any]] = field(default_factory=list)  # deleted after the test


@pytest.fixture
def gitops(cluster: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]) -> Iterator[GitOps]:
    """Two replicas of the release, not started. (`coscheduler`: the session's release made
    Tekton's namespace, which the chart's RBAC needs.)"""
    cluster.create_namespace(NAMESPACE)
    made = GitOps([replica(cluster, f"{RELEASE}-{i}") for i in range(2)])
    try:
        yield made
    finally:
        for each in made.replicas:
            each.stop()
        chart.delete(cluster, made.applied)
        with cluster.api_client() as api:
            client.CoreV1Api(api).delete_namespace(NAMESPACE)


def test_helm_template_applied_twice_keeps_the_ca_and_admission_works(
    cluster: ClusterHandle, gitops: GitOps
) -> None:
    replicas = gitops.replicas
    first, second = replicas
    # All replicas answer behind one URL in a cluster; here the API server calls the first.
    _, docs = rendering(cluster, first.webhook_url)
    assert not [d for d in docs if d["kind"] == "Secret"]  # nothing to keep in the rendering
    gitops.applied.extend(docs)
    chart.apply(cluster, docs)
    for each in replicas:
        each.kubeconfig = chart.service_account_kubeconfig(
            cluster, cluster.logs_dir / f"{each.name}.kubeconfig", release=RELEASE, namespace=NAMESPACE)

    # Both start at once: one makes the Secret, the other reads it back.
    errors: list[BaseException] = []

    def start(each: Coscheduler) -> None:
        try:
            each.start()
        except BaseException as e:  # reported below, with the replica's name
            errors.append(e)

    threads = [threading.Thread(target=start, args=(each,)) for each in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert errors == []

    with cluster.api_client() as api:
        core, reg = client.CoreV1Api(api), client.AdmissionregistrationV1Api(api)

        def state() -> tuple[str, set[str]]:
            # The client types a Secret's data bytes | str; from a server it is base64 text.
            secret = cast(dict[str, str], core.read_namespaced_secret(SECRET, NAMESPACE).data)
            hooks = present(reg.read_mutating_webhook_configuration(FULLNAME).webhooks)
            return secret["ca.crt"], {cast(str, h.client_config.ca_bundle) for h in hooks}

        ca, bundles = state()
        assert bundles == {ca}, "the webhook configuration trusts the Secret's CA"
        secret = cast(dict[str, str], core.read_namespaced_secret(SECRET, NAMESPACE).data)
        assert served(first) == served(second) == der(secret["tls.crt"])

        target = cluster.create_namespace(f"git-{uuid.uuid4().hex[:6]}", labels={LABEL: "true"})
        scenario = Scenario(cluster, target)
        run = scenario.run(workspaces=[{"name": "w", "emptyDir": {}}])
        pod = scenario.task_pod(run, "first-sync", claims=())
        assert scenario.pod(pod)["spec"]["affinity"]["podAffinity"][REQ]

        # The next sync: rendered again, applied again; then the replicas restart (a rollout).
        _, again = rendering(cluster, first.webhook_url)
        assert again == docs
        chart.apply(cluster, again)
        assert state() == (ca, {ca})
        pod = scenario.task_pod(run, "second-sync", claims=())
        assert scenario.pod(pod)["spec"]["affinity"]["podAffinity"][REQ]
        for each in replicas:
            each.stop()
            each.start()
        assert state() == (ca, {ca})
        assert served(first) == der(secret["tls.crt"])
        pod = scenario.task_pod(run, "after-restart", claims=())
        assert scenario.pod(pod)["spec"]["affinity"]["podAffinity"][REQ]
        scenario.close()
        core.delete_namespace(target)
