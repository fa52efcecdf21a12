"""The chart installed for real, with the image built from this repository's Dockerfile, on a
kind cluster (`pytest e2e --backend kind`; needs Docker, so it skips on machines without it).

Everything else in the suite runs the controller on the host; here the two replicas run in the
cluster with the chart's own Deployment, Service, webhook TLS and RBAC, and a run's pods are
placed by the cluster's scheduler beside the balloon."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from controller.core.basics import names
from e2e.harness import chart
from e2e.harness.cluster import Backend, ClusterHandle, KindCluster, present
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.scenario import Scenario

pytestmark = pytest.mark.e2e

IMAGE_REPOSITORY, IMAGE_TAG = "tekton-coscheduler", "e2e"
RELEASE = NAMESPACE = "tekton-coscheduler"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.fixture(scope="module")
def installed(cluster: ClusterHandle) -> Iterator[KindCluster]:
    if cluster.backend != Backend.KIND or not isinstance(cluster, KindCluster):
        pytest.skip("the in-cluster install runs on the kind backend (--backend kind)")
    if shutil.which("docker") is None:
        pytest.skip("building the image needs Docker")
    image = f"{IMAGE_REPOSITORY}:{IMAGE_TAG}"
    subprocess.run(["docker", "build", "-t", image, str(chart.REPO)], check=True, timeout=900)
    cluster.load_image(image)
    tekton_cluster.install(cluster, None)  # Tekton's CRDs and ConfigMaps (coschedule: disabled)
    chart.run_helm(
        [
            "install",
            RELEASE,
            str(chart.CHART),
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--set",
            "image.registry=",  # the image kind loaded: its name alone
            "--set",
            f"image.repository={IMAGE_REPOSITORY}",
            "--set",
            f"image.tag={IMAGE_TAG}",
            "--set",
            "image.pullPolicy=Never",
            "--wait",  # both replicas Ready: /readyz answers once their view is synced
            "--timeout",
            "5m",
        ],
        kubeconfig=cluster.kubeconfig,
    )
    yield cluster
    chart.uninstall(cluster, release=RELEASE, namespace=NAMESPACE)


def test_a_run_is_anchored_by_the_in_cluster_controller(installed: KindCluster) -> None:
    worker = installed.workers()[-1]
    ns = installed.create_namespace(
        f"kind-{uuid.uuid4().hex[:6]}", labels={names.NAMESPACE_LABEL: "true"}
    )
    scenario = Scenario(installed, ns)
    scenario.claim_on(worker)  # the run's volume can only be on this worker
    run = scenario.run()
    assert scenario.balloon_node(run, timeout=120) == worker
    pods = [scenario.task_pod(run, task) for task in ("clone", "build", "test")]
    for pod in pods:
        assert scenario.pod(pod)["spec"]["affinity"]["podAffinity"][REQ]  # the webhook answered
        assert scenario.pod_node(pod, timeout=120) == worker
    with installed.api_client() as api:
        # The release name holds the chart's, so the full name (and the Lease's) is the release's.
        lease = client.CoordinationV1Api(api).read_namespaced_lease(RELEASE, NAMESPACE)
    assert present(lease.spec).holder_identity  # one replica leads
    scenario.close()
