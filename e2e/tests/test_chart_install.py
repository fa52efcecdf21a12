"""The chart installed on the real control plane: its identity's limits, upgrade, uninstall.

The session's `coscheduler` fixture already installed the chart and runs the operator with
the chart's ServiceAccount token: every other e2e test is evidence that the chart's RBAC is
enough. These tests show that it is not more than needed, and that upgrades and uninstalls
behave."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from controller.core.basics import names
from controller.core.placement import budget, gate
from e2e.harness import chart
from e2e.harness.cluster import ClusterHandle, name_of, present
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.scenario import Scenario

pytestmark = pytest.mark.e2e

# These releases test what webhook mode installs (certificates, the webhook Service port);
# the session's release runs in the mode the chart chooses (policy on this API server).
WEBHOOK_MODE = {"admission.mode": "webhook"}

REQ = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.fixture
def as_chart(coscheduler: Coscheduler) -> Iterator[client.ApiClient]:
    assert coscheduler.kubeconfig is not None
    api = config.new_client_from_config(str(coscheduler.kubeconfig))  # type: ignore[no-untyped-call]
    yield api
    api.close()


def forbidden(call: Callable[[], Any]) -> bool:
    try:
        call()
    except ApiException as e:
        return bool(e.status == 403)  # the client leaves `status` untyped
    return False


def test_chart_identity_is_refused_what_it_must_not_do(
    as_chart: client.ApiClient, cluster: ClusterHandle
) -> None:
    core, custom = client.CoreV1Api(as_chart), client.CustomObjectsApi(as_chart)
    apps, reg = client.AppsV1Api(as_chart), client.AdmissionregistrationV1Api(as_chart)
    policy = client.PolicyV1Api(as_chart)
    ns = cluster.create_namespace(f"rbac-{uuid.uuid4().hex[:6]}")
    with cluster.api_client() as admin:  # a run, as its owner made it
        client.CustomObjectsApi(admin).create_namespaced_custom_object(
            "tekton.dev", "v1", ns, "pipelineruns", {
                "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
                "metadata": {"name": "theirs", "labels": {"team": "a"}},
                "spec": {"status": "PipelineRunPending",
                         "pipelineSpec": {"tasks": [{"name": "t", "taskSpec": {"steps": [
                             {"name": "s", "image": "busybox", "script": "true"}]}}]}}})

        # a team's own budget
        client.PolicyV1Api(admin).create_namespaced_pod_disruption_budget(ns, {  # type: ignore[arg-type]
            "metadata": {"name": "theirs"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"team": "a"}}}})

        # a pod held by our gate and another's, as its owner made it
        client.CoreV1Api(admin).create_namespaced_pod(ns, {  # type: ignore[arg-type]
            "metadata": {"name": "held", "labels": {"team": "a"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                     "schedulingGates": [{"name": gate.GATE}, {"name": "example.com/quota"}]}})

    def patch_pod(body: dict[str, Any]) -> Callable[[], Any]:
        return lambda: core.patch_namespaced_pod("held", ns, body)

    def patch_run(body: dict[str, Any]) -> Callable[[], Any]:
        return lambda: custom.patch_namespaced_custom_object(
            "tekton.dev", "v1", ns, "pipelineruns", "theirs", body)

    refused = {
        "read secrets": lambda: core.list_secret_for_all_namespaces(),
        "create pods": lambda: core.create_namespaced_pod(
            ns,
            {  # type: ignore[arg-type]
                "metadata": {"name": "x"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        ),
        # the pods guard lets it make reservation pods only: not one dressed as one
        "create a pod dressed as a reservation": lambda: core.create_namespaced_pod(
            ns,
            {  # type: ignore[arg-type]
                "metadata": {"name": "y", "labels": {
                    "app.kubernetes.io/managed-by": "tekton-coscheduler",
                    "app.kubernetes.io/component": "reservation"}},
                "spec": {"priorityClassName": f"{chart.RELEASE}-tekton-coscheduler-reservation",
                         "automountServiceAccountToken": False,
                         "containers": [{"name": "c", "image": "busybox"}],
                         "volumes": [{"name": "h", "hostPath": {"path": "/"}}]},
            },
        ),
        # it may patch a run's labels and annotations of its own domain (the mark), nothing else
        "patch a run's spec": patch_run({"spec": {"status": "Cancelled"}}),
        "patch a run's own labels": patch_run({"metadata": {"labels": {"team": "b"}}}),
        "remove a run's label": patch_run({"metadata": {"labels": {"team": None}}}),
        "add a run's annotation": patch_run({"metadata": {"annotations": {"x": "y"}}}),
        # it may take its scheduling gate off a pod, nothing else of a pod changing
        "swap a pod's image": patch_pod(
            {"spec": {"containers": [{"name": "c", "image": "evil.example.com/x"}]}}),
        "relabel a pod": patch_pod({"metadata": {"labels": {"team": "b"}}}),
        "take another's gate off": patch_pod({"spec": {"schedulingGates": [
            {"name": "example.com/quota", "$patch": "delete"}]}}),
        "take both gates off": patch_pod({"spec": {"schedulingGates": [
            {"name": gate.GATE, "$patch": "delete"},
            {"name": "example.com/quota", "$patch": "delete"}]}}),
        "delete another's budget": lambda: policy.delete_namespaced_pod_disruption_budget(
            "theirs", ns),
        "make a budget not ours": lambda: policy.create_namespaced_pod_disruption_budget(ns, {  # type: ignore[arg-type]
            "metadata": {"name": "lax"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"team": "b"}}}}),
        "delete namespaces": lambda: core.delete_namespace(ns),
        "write Tekton's config": lambda: core.patch_namespaced_config_map(
            "feature-flags", "tekton-pipelines", {"data": {"coschedule": "workspaces"}}
        ),
        "read configmaps elsewhere": lambda: core.list_namespaced_config_map("default"),
        "change webhooks": lambda: reg.list_mutating_webhook_configuration(),
        "touch deployments": lambda: apps.list_deployment_for_all_namespaces(),
        "leases outside its namespace": lambda: client.CoordinationV1Api(
            as_chart
        ).list_namespaced_lease("kube-system"),
        "update statefulsets": lambda: apps.replace_namespaced_stateful_set(
            "x",
            ns,
            client.V1StatefulSet(
                metadata=client.V1ObjectMeta(name="x"),
                spec=client.V1StatefulSetSpec(
                    selector=client.V1LabelSelector(match_labels={"a": "b"}),
                    template=client.V1PodTemplateSpec(),
                ),
            ),
        ),
    }
    allowed_anyway = [what for what, call in refused.items() if not forbidden(call)]
    assert allowed_anyway == []
    patch_run({"metadata": {"labels": {names.LABEL_ANCHORED: "uid"},
                            "annotations": {names.ANNOTATION_TOPOLOGY_KEY: "zone"}}})()
    patch_pod(gate.release())()
    gates = present(present(core.read_namespaced_pod("held", ns).spec).scheduling_gates)
    assert [g.name for g in gates] == ["example.com/quota"]
    # and what it needs works
    policy.create_namespaced_pod_disruption_budget(ns, budget.of_namespace(ns))  # type: ignore[arg-type]
    policy.delete_namespaced_pod_disruption_budget(budget.NAME, ns)
    assert core.list_namespace(label_selector=f"{names.NAMESPACE_LABEL}=true") is not None
    assert (
        apps.list_stateful_set_for_all_namespaces(label_selector=names.BALLOON_SELECTOR) is not None
    )


def test_upgrade_keeps_the_webhook_answering_and_the_ca_stable(
    cluster: ClusterHandle, coscheduler: Coscheduler
) -> None:
    release, ns = "tcs-upgrade", "tcs-upgrade"
    out = chart.install(
        cluster, coscheduler.webhook_url, coscheduler.ca_bundle, release=release, namespace=ns,
        values=WEBHOOK_MODE,
    )
    assert "kubectl label namespace" in out and "coschedule" in out  # NOTES say what to do next
    with cluster.api_client() as api:
        core, reg = client.CoreV1Api(api), client.AdmissionregistrationV1Api(api)
        secret = f"{release}-tekton-coscheduler-webhook-tls"
        ca_before = present(core.read_namespaced_secret(secret, ns).data)["ca.crt"]
        target = cluster.create_namespace(
            f"upg-{uuid.uuid4().hex[:6]}", labels={names.NAMESPACE_LABEL: "true"}
        )
        s = Scenario(cluster, target)
        run = s.run(workspaces=[{"name": "w", "emptyDir": {}}])
        created: list[str] = []
        errors: list[str] = []
        done = threading.Event()

        def keep_creating() -> None:
            # Bounded: these pods never finish, and a node holds 110.
            while not done.is_set() and len(created) < 40:
                try:
                    created.append(s.task_pod(run, f"t{len(created)}", claims=()))
                except ApiException as e:
                    errors.append(f"{e.status}: {e.body}")
                done.wait(0.05)

        worker = threading.Thread(target=keep_creating)
        worker.start()
        try:
            chart.install(
                cluster,
                coscheduler.webhook_url,
                coscheduler.ca_bundle,
                release=release,
                namespace=ns,
                upgrade=True,
                values={**WEBHOOK_MODE, "config.logLevel": "DEBUG", "webhook.timeoutSeconds": 7},
            )
        finally:
            done.set()
            worker.join(60)
        assert errors == []
        assert len(created) > 0
        for name in created:
            assert s.pod(name)["spec"]["affinity"]["podAffinity"][REQ], name
        hook = present(reg.read_mutating_webhook_configuration(f"{release}-tekton-coscheduler").webhooks)[0]
        assert hook.timeout_seconds == 7
        assert present(core.read_namespaced_secret(secret, ns).data)["ca.crt"] == ca_before

        chart.uninstall(cluster, release=release, namespace=ns)
        names_left = [name_of(m) for m in reg.list_mutating_webhook_configuration().items]
        assert f"{release}-tekton-coscheduler" not in names_left
        assert not [x for x in core.list_namespaced_secret(ns).items if name_of(x) == secret]
        # pods of opted-in namespaces are still created (the session's own release still answers)
        assert s.pod_node(s.task_pod(run, "after-uninstall", claims=()))
        s.close()
        core.delete_namespace(target)


RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def test_the_deployment_is_admitted_under_restricted_pod_security_and_serves_the_service(
    cluster: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]
) -> None:
    """The chart's own Deployment, kept this time: the real API server admits its pods in a
    namespace enforcing Pod Security "restricted", the real scheduler spreads the two replicas,
    the Service selects them on the webhook port, and the PDB counts them. (kwok's fake kubelets
    "run" the pods: no container starts, so the webhook itself is still the host process.)"""
    release = ns = "tcs-restricted"
    cluster.create_namespace(ns, labels=RESTRICTED)
    fullname = f"{release}-tekton-coscheduler"
    selector = f"app.kubernetes.io/name=tekton-coscheduler,app.kubernetes.io/instance={release}"
    with cluster.api_client() as api:
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        policy, discovery = client.PolicyV1Api(api), client.DiscoveryV1Api(api)
        # The namespace does enforce: an ordinary pod (root allowed, no seccomp) is refused.
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod(
                ns,
                {  # type: ignore[arg-type]
                    "metadata": {"name": "plain"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            )
        assert refused.value.status == 403 and "PodSecurity" in str(refused.value.body)

        chart.install(
            cluster,
            coscheduler.webhook_url,
            coscheduler.ca_bundle,
            release=release,
            namespace=ns,
            keep_deployment=True,
            values=WEBHOOK_MODE,  # the Service's webhook port is what this test looks at
        )

        def available() -> bool:
            status = present(apps.read_namespaced_deployment(fullname, ns).status)
            return status.available_replicas == 2

        try:
            cluster.wait_for(available, timeout=60, what="the chart's Deployment available")
        except TimeoutError as e:
            failures = [
                f"{name_of(rs)}: {c.message}"
                for rs in apps.list_namespaced_replica_set(ns).items
                for c in present(rs.status).conditions or []
                if c.type == "ReplicaFailure"
            ]
            raise AssertionError(f"{e}; replica set failures: {failures}") from e

        pods = core.list_namespaced_pod(ns, label_selector=selector).items
        assert len({present(p.spec).node_name for p in pods}) == 2, "replicas should prefer distinct nodes"

        def endpoints() -> set[str]:
            slices = discovery.list_namespaced_endpoint_slice(
                ns, label_selector=f"kubernetes.io/service-name={fullname}"
            ).items
            return {
                f"{address}:{port.port}"
                for s in slices
                for port in s.ports or []
                if port.name == "webhook"
                for endpoint in s.endpoints or []
                if present(endpoint.conditions).ready
                for address in endpoint.addresses
            }

        expected = {f"{present(p.status).pod_ip}:9443" for p in pods}
        cluster.wait_for(lambda: endpoints() == expected, timeout=30, what="webhook endpoints")

        def budget_counts_both() -> bool:
            status = present(policy.read_namespaced_pod_disruption_budget(fullname, ns).status)
            return status.current_healthy == 2 and status.disruptions_allowed == 1

        cluster.wait_for(budget_counts_both, timeout=30, what="the PDB to count both replicas")

        chart.uninstall(cluster, release=release, namespace=ns)
        cluster.wait_for(
            lambda: not core.list_namespaced_pod(ns, label_selector=selector).items,
            timeout=60,
            what="the chart's pods gone after uninstall",
        )
