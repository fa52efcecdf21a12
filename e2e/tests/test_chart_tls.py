"""The chart's webhook TLS modes other than the default, end to end. (`generate`, the default,
is what the session's release and the upgrade test use.)

- certManager, against a real cert-manager (its controller and cainjector, built from the Go
  module by `e2e/build.sh certmanager`): cert-manager issues the webhook's certificate from the
  chart's own CA, the cainjector puts that CA into the chart's MutatingWebhookConfiguration, the
  real API server then trusts our server, and a renewal is served without a restart;
- secret: the administrator's Secret is served and the caBundle value is what the API server
  trusts.

Each release gets its own opt-in label, so only its test namespace reaches its webhook. Its
replica runs on the host (no containers here) with the release's ServiceAccount token, reading
the Secret through a directory updated the way the kubelet updates a secret volume."""

from __future__ import annotations

import base64
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import trustme
from kubernetes import client

from e2e.harness import chart
from e2e.harness.cluster import BinaryNotFound, ClusterHandle, cert_manager, name_of, present
from e2e.harness.coscheduler import Coscheduler, project_secret
from e2e.harness.scenario import Scenario

pytestmark = [pytest.mark.e2e, pytest.mark.parts("certmanager")]

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
# certManager mode's release; namespaces with LABEL go to its webhook (not the session's).
LABEL = "e2e.tekton-coscheduler.dev/cert-manager"
RELEASE = NAMESPACE = "tcs-cm"
FULLNAME = f"{RELEASE}-tekton-coscheduler"
CERTIFICATE = f"{FULLNAME}-webhook"
SECRET = f"{FULLNAME}-webhook-tls"


@pytest.fixture(scope="module")
def with_cert_manager(cluster: ClusterHandle) -> ClusterHandle:
    try:
        cluster.start_cert_manager()
    except BinaryNotFound as e:
        pytest.skip(str(e))
    return cluster


@dataclass
class Replica:
    operator: Coscheduler
    tls_dir: Path  # what the kubelet would keep up to date from the Secret

    def served(self) -> str:
        return leaf(ssl.get_server_certificate(("127.0.0.1", self.operator.webhook_port)))


def unstarted_replica(cluster: ClusterHandle, release: str, label: str) -> Replica:
    """A replica for `release` (installed in the namespace of that name) that will serve the
    files of tls_dir and act on namespaces labelled `label`."""
    tls_dir = cluster.logs_dir / f"{release}-tls"
    operator = Coscheduler(
        cluster,
        name=f"{release}-replica",
        env_overrides={
            "POD_NAMESPACE": release,
            "COSCHEDULER_NAMESPACE_LABEL": label,
            "COSCHEDULER_WEBHOOK_CERT_CHECK_INTERVAL": "1",
        },
        tls_files=(tls_dir / "tls.crt", tls_dir / "tls.key"),
    )
    return Replica(operator, tls_dir)


def start(replica: Replica, release: str, secret: dict[str, str]) -> None:
    """Mounts the Secret's data (as the kubelet would) and starts the replica with the
    release's ServiceAccount identity."""
    cluster = replica.operator.cluster
    project_secret(secret, replica.tls_dir)
    replica.operator.kubeconfig = chart.service_account_kubeconfig(
        cluster, cluster.logs_dir / f"{release}-sa.kubeconfig", release=release, namespace=release
    )
    replica.operator.start()


@pytest.fixture
def replica(
    with_cert_manager: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]
) -> Iterator[Replica]:
    """A release in certManager mode and, once its certificate is issued, a replica serving it.
    (`coscheduler`: the session's release made Tekton's namespace, which the chart's RBAC needs.)"""
    cluster = with_cert_manager
    replica = unstarted_replica(cluster, RELEASE, LABEL)
    chart.install(
        cluster,
        replica.operator.webhook_url,
        "",  # left to the cainjector
        values={"admission.mode": "webhook", "webhook.tls.mode": "certManager",
                "config.namespaceLabel": LABEL},
        release=RELEASE,
        namespace=NAMESPACE,
    )
    with cluster.api_client() as api:
        cluster.wait_for(
            lambda: ready(client.CustomObjectsApi(api)),
            timeout=60,
            what="cert-manager to issue the webhook certificate",
        )
        start(replica, RELEASE, secret_data(api))
    try:
        yield replica
    finally:
        replica.operator.stop()


def ready(custom: client.CustomObjectsApi) -> bool:
    cert = cast(dict[str, Any], custom.get_namespaced_custom_object(
        cert_manager.GROUP, cert_manager.VERSION, NAMESPACE, "certificates", CERTIFICATE
    ))
    conditions = cert.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def secret_data(api: client.ApiClient) -> dict[str, str]:
    # The client types a Secret's data bytes | str; read back from a server it is base64 text.
    return cast(dict[str, str], client.CoreV1Api(api).read_namespaced_secret(SECRET, NAMESPACE).data)


def injected_ca(api: client.ApiClient, configuration: str = FULLNAME) -> str:
    reg = client.AdmissionregistrationV1Api(api)
    hook = present(reg.read_mutating_webhook_configuration(configuration).webhooks)[0]
    return str(hook.client_config.ca_bundle or "")


def webhook_configurations(api: client.ApiClient) -> list[str]:
    reg = client.AdmissionregistrationV1Api(api)
    return [name_of(m) for m in reg.list_mutating_webhook_configuration().items]


def leaf(pem: str) -> str:
    """The first certificate of a PEM chain, normalised."""
    first = pem.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    return ssl.DER_cert_to_PEM_cert(ssl.PEM_cert_to_DER_cert(first.strip() + "\n"))


def renew(custom: client.CustomObjectsApi) -> None:
    """What `cmctl renew` does: the Issuing condition, set by hand."""
    cert = cast(dict[str, Any], custom.get_namespaced_custom_object(
        cert_manager.GROUP, cert_manager.VERSION, NAMESPACE, "certificates", CERTIFICATE
    ))
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions: list[dict[str, Any]] = [
        c for c in cert.get("status", {}).get("conditions", []) if c["type"] != "Issuing"
    ]
    conditions.append(
        {
            "type": "Issuing",
            "status": "True",
            "reason": "ManuallyTriggered",
            "message": "renewal asked for by the e2e suite",
            "lastTransitionTime": now,
        }
    )
    custom.patch_namespaced_custom_object_status(
        cert_manager.GROUP,
        cert_manager.VERSION,
        NAMESPACE,
        "certificates",
        CERTIFICATE,
        {"status": {"conditions": conditions}},
    )


def test_cert_manager_issues_injects_and_a_renewal_is_served_without_restart(
    cluster: ClusterHandle, replica: Replica
) -> None:
    target = cluster.create_namespace(f"cm-{uuid.uuid4().hex[:6]}", labels={LABEL: "true"})
    scenario = Scenario(cluster, target)
    run = scenario.run(workspaces=[{"name": "w", "emptyDir": {}}])
    with cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        first = secret_data(api)
        # The CA the cainjector put in is the chart's cert-manager CA, which signed our cert.
        cluster.wait_for(
            lambda: injected_ca(api) == first["ca.crt"], timeout=60, what="CA injected"
        )
        assert replica.served() == leaf(base64.b64decode(first["tls.crt"]).decode())
        # The API server trusts it: a TaskRun pod of the opted-in namespace is pinned.
        pod = scenario.task_pod(run, "before", claims=())
        assert scenario.pod(pod)["spec"]["affinity"]["podAffinity"][REQ]

        started = time.monotonic()
        renew(custom)
        cluster.wait_for(
            lambda: secret_data(api)["tls.crt"] != first["tls.crt"],
            timeout=60,
            what="cert-manager to renew the certificate",
        )
        second = secret_data(api)
        assert second["tls.key"] != first["tls.key"]  # rotationPolicy: Always
        project_secret(second, replica.tls_dir)
        expected = leaf(base64.b64decode(second["tls.crt"]).decode())
        cluster.wait_for(
            lambda: replica.served() == expected, timeout=30, what="the renewed certificate served"
        )
        print(f"renewal asked -> new certificate served: {time.monotonic() - started:.2f}s")
        process = replica.operator.process
        assert process is not None and process.running()
        assert replica.operator.restarts == 1  # the same process all along
        assert injected_ca(api) == first["ca.crt"]  # same CA: nothing to re-inject
        pod = scenario.task_pod(run, "after", claims=())
        assert scenario.pod(pod)["spec"]["affinity"]["podAffinity"][REQ]

    replica.operator.stop()  # as the Deployment would go: before its RBAC
    chart.uninstall(cluster, release=RELEASE, namespace=NAMESPACE)
    with cluster.api_client() as api:
        assert FULLNAME not in webhook_configurations(api)
        certificates = cast(dict[str, Any], client.CustomObjectsApi(api).list_namespaced_custom_object(
            cert_manager.GROUP, cert_manager.VERSION, NAMESPACE, "certificates"
        ))["items"]
        assert certificates == []
    scenario.close()


def test_an_existing_secret_is_served_and_its_ca_bundle_trusted(
    cluster: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]
) -> None:
    release, label = "tcs-secret", "e2e.tekton-coscheduler.dev/secret-mode"
    fullname, secret_name = f"{release}-tekton-coscheduler", "webhook-serving-cert"
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", f"{fullname}.{release}.svc")
    secret = {
        "tls.crt": base64.b64encode(issued.cert_chain_pems[0].bytes()).decode(),
        "tls.key": base64.b64encode(issued.private_key_pem.bytes()).decode(),
    }
    ca_bundle = base64.b64encode(ca.cert_pem.bytes()).decode()
    cluster.create_namespace(release)
    with cluster.api_client() as api:
        client.CoreV1Api(api).create_namespaced_secret(
            release,
            {  # type: ignore[arg-type]
                "metadata": {"name": secret_name},
                "type": "kubernetes.io/tls",
                "data": secret,
            },
        )
        replica = unstarted_replica(cluster, release, label)
        chart.install(
            cluster,
            replica.operator.webhook_url,
            "",  # keep the chart's caBundle: the value given below
            values={
                "admission.mode": "webhook",
                "webhook.tls.mode": "secret",
                "webhook.tls.existingSecret": secret_name,
                "webhook.tls.caBundle": ca_bundle,
                "config.namespaceLabel": label,
            },
            release=release,
            namespace=release,
        )
        assert injected_ca(api, fullname) == ca_bundle
        start(replica, release, secret)
        try:
            assert replica.served() == leaf(issued.cert_chain_pems[0].bytes().decode())
            target = cluster.create_namespace(f"sec-{uuid.uuid4().hex[:6]}", labels={label: "true"})
            scenario = Scenario(cluster, target)
            run = scenario.run(workspaces=[{"name": "w", "emptyDir": {}}])
            pod = scenario.task_pod(run, "t", claims=())
            assert scenario.pod(pod)["spec"]["affinity"]["podAffinity"][REQ]
            scenario.close()
        finally:
            replica.operator.stop()
        chart.uninstall(cluster, release=release, namespace=release)
        assert fullname not in webhook_configurations(api)
        # The Secret is the administrator's: the chart never owned it, so it stays.
        assert client.CoreV1Api(api).read_namespaced_secret(secret_name, release).data == secret
