"""On real nodes: what `helm install` gives users, running as real containers.

A control plane of its own (its API server on an address pods reach), two real nodes (kubelet,
containerd, runc, a CNI bridge each) and kube-proxy; the operator from the image built from our
Dockerfile, started by the chart's Deployment; Tekton's controller with its real images, so
that steps really run and really share a volume; the balloon a real pause container. The nodes
pull every image from the lab's registry, with pull secrets, as users' nodes do.
"""

from __future__ import annotations

import contextlib
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from controller.core.basics import names
from controller.core.model.assistant import pinned_to_assistant
from controller.core.placement.balloon import balloon_name
from controller.core.placement.gate import PLACEHOLDER_GATE
from e2e.harness import chart
from e2e.harness import real as real_
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import name_of, present, realhost, realimages, realnode
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.load import PodLoad
from e2e.harness.real import Real
from e2e.harness.rollout_trace import RolloutTrace
from e2e.harness.runs import Runs, assert_co_located, our_terms
from e2e.harness.tekton_runs import PodRecorder

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.parts("realnode")]

FULLNAME, NAMESPACE, SELECTOR = real_.FULLNAME, real_.NAMESPACE, real_.SELECTOR
install, write_and_read = real_.install, real_.write_and_read
RATE = 20  # pod creations a second through the webhook, during the rollout


def run_in(real: Real, ns: str, argv: list[str], **spec: Any) -> str:
    """A pod of the project's image running `argv` to its end; its log."""
    name = f"cmd-{uuid.uuid4().hex[:6]}"
    with real.cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod(ns, {  # type: ignore[arg-type]
            "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", **spec,
                     "imagePullSecrets": [{"name": real_.PULL_SECRET}], "containers": [{
                "name": "c", "image": real.image.name, "imagePullPolicy": "IfNotPresent",
                "command": argv,
                "securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True,
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}}}]}})
        real.cluster.wait_for(
            lambda: present(core.read_namespaced_pod(name, ns).status).phase in ("Succeeded", "Failed"),
            timeout=120, what=f"pod {name} ended")
        return str(core.read_namespaced_pod_log(name, ns))


def test_a_node_pulls_from_the_lab_s_registry_and_only_with_its_pull_secret(real: Real) -> None:
    """Nodes pull as users' nodes do, from a registry that wants credentials. A pod without the
    pull secret does not get its image, not even once the node holds it (the kubelet checks a
    pod's credentials for an image it pulled for another pod); the same pod with the secret
    runs, and its node's kubelet says what it pulled."""
    ns = real.cluster.create_namespace(f"pull-{uuid.uuid4().hex[:6]}")  # no secret granted
    secret = real_.pull_secret(real, ns)
    node, image = real.nodes.nodes[0].name, realimages.busybox()
    with real.cluster.api_client() as api:
        core = client.CoreV1Api(api)

        def pod(secrets: list[dict[str, str]]) -> str:
            name = f"pull-{uuid.uuid4().hex[:6]}"
            core.create_namespaced_pod(ns, {  # type: ignore[arg-type]
                "metadata": {"name": name},
                "spec": {"restartPolicy": "Never", "imagePullSecrets": secrets,
                         "nodeSelector": {"kubernetes.io/hostname": node},
                         "containers": [{"name": "c", "image": image, "command": ["true"],
                                         "imagePullPolicy": "IfNotPresent"}]}})
            return name

        def refused(name: str) -> str:
            """The kubelet's word on the failed pull, once the pod waits for its image."""
            def failed() -> str | None:
                status = present(core.read_namespaced_pod(name, ns).status)
                if not any((waiting := present(s.state).waiting) and waiting.reason in (
                        "ErrImagePull", "ImagePullBackOff")
                        for s in status.container_statuses or []):
                    return None
                events = core.list_namespaced_event(
                    ns, field_selector=f"involvedObject.name={name},reason=Failed").items
                return next((str(e.message) for e in events if "pull" in present(e.message)), None)

            return real.cluster.wait_for(failed, timeout=90, what=f"{name} refused its image")

        before = refused(pod([]))
        ran = pod([{"name": secret}])
        real.cluster.wait_for(lambda: present(core.read_namespaced_pod(ran, ns).status).phase
                              == "Succeeded", timeout=120, what=f"{ran} pulled and ran")
        after = refused(pod([]))  # the node holds the image now
    print(f"without the secret: {before}\nonce the node holds the image: {after}")
    for message in (before, after):  # containerd's words for the registry's 401 to it
        assert "authorization failed: no basic auth credentials" in message, message
    pulls = [p for p in real.nodes.pulled(node) if p.image == image]
    print(f"{node} pulled: {pulls}")
    assert len(pulls) == 1 and pulls[0].bytes > 0, pulls


def test_the_image_runs_as_the_chart_promises(real: Real) -> None:
    """The chart's replicas run, as the kernel sees their processes, as the image's USER (uid
    65532: the chart fixes none) on a read-only root filesystem; `version`, and `check`
    with the chart's ServiceAccount through the `kubernetes` Service, work in the image."""
    install(real, "policy")
    pods = realnode.wait_pods_ready(real.cluster, NAMESPACE, SELECTOR, 2)
    by_name = {n.name: n for n in real.nodes.nodes}
    for pod in pods:
        statuses = present(present(pod.status).container_statuses)
        pid = by_name[present(present(pod.spec).node_name)].process(present(statuses[0].container_id))
        status = Path(f"/proc/{pid}/status").read_text()
        ids = {line.split(":")[0]: line.split()[1:] for line in status.splitlines()
               if line.startswith(("Uid:", "Gid:"))}
        # The image's user; the group is the runtime's (0 when no runAsGroup is set, as
        # OpenShift runs its arbitrary UIDs), since the chart fixes neither.
        assert ids["Uid"] == ["65532"] * 4, ids
        root = next(line.split() for line in Path(f"/proc/{pid}/mounts").read_text().splitlines()
                    if line.split()[1] == "/")
        assert "ro" in root[3].split(","), root
    assert "tekton-coscheduler" in run_in(real, NAMESPACE, ["tekton-coscheduler", "version"])
    check = run_in(real, NAMESPACE, ["tekton-coscheduler", "check"],
                   serviceAccountName=FULLNAME, automountServiceAccountToken=True)
    assert "verdict: ready" in check, check
    # Its budget (docs/benchmarks-image.md), on the archive: the layers and their tar headers.
    size = real.image.size_bytes / 2**20
    print(f"the image: {size:.0f} MiB")
    assert size <= 150, f"the image weighs {size:.1f} MiB, over its 150 MiB"


def test_helm_test_runs_check_under_the_operator_s_account(real: Real) -> None:
    """`helm test` runs `check` in a pod of the image, as the operator's ServiceAccount: it
    passes on a good install, and fails once that account lost a permission it needs."""
    install(real, "policy")
    kubeconfig = real.cluster.kubeconfig
    passed = chart.run_helm(["test", chart.RELEASE, "--namespace", NAMESPACE, "--logs"],
                            kubeconfig=kubeconfig)
    assert "Phase:          Succeeded" in passed.stdout and "verdict: ready" in passed.stdout
    with real.cluster.api_client() as api:
        rbac = client.RbacAuthorizationV1Api(api)
        binding = rbac.read_cluster_role_binding(FULLNAME)
        rbac.delete_cluster_role_binding(FULLNAME)
        try:
            failed = chart.run_helm(["test", chart.RELEASE, "--namespace", NAMESPACE, "--logs"],
                                    kubeconfig=kubeconfig, check=False)
        finally:
            binding.metadata = client.V1ObjectMeta(name=FULLNAME, labels=present(binding.metadata).labels,
                                                   annotations=present(binding.metadata).annotations)
            rbac.create_cluster_role_binding(binding)
    assert failed.returncode != 0, failed.stdout
    assert "Failed" in failed.stdout + failed.stderr


def test_the_chart_s_replicas_run_lead_and_serve_metrics_through_their_service(real: Real) -> None:
    install(real, "policy")
    pods = realnode.wait_pods_ready(real.cluster, NAMESPACE, SELECTOR, 2)
    assert {present(p.spec).node_name for p in pods} == {n.name for n in real.nodes.nodes}
    with real.cluster.api_client() as api:
        coordination, core = client.CoordinationV1Api(api), client.CoreV1Api(api)

        def holder() -> str:
            lease = coordination.read_namespaced_lease(FULLNAME, NAMESPACE)
            return str(present(lease.spec).holder_identity or "")

        try:
            leader = real.cluster.wait_for(holder, timeout=60, what="a replica holds the Lease")
        except TimeoutError:
            for pod in pods:
                print(core.read_namespaced_pod_log(name_of(pod), NAMESPACE, tail_lines=60))
            raise
        service = core.read_namespaced_service(FULLNAME, NAMESPACE)
    assert leader.split("_")[0] in {name_of(p) for p in pods}, leader
    url = f"http://{present(service.spec).cluster_ip}:9090/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:  # kube-proxy to a replica
        assert b"tekton_coscheduler_" in resp.read()


@pytest.fixture
def real_runs(real: Real) -> Iterator[Runs]:
    ns = real_.namespace(real, f"rr-{uuid.uuid4().hex[:6]}", {names.NAMESPACE_LABEL: "true"})
    with PodRecorder(real.cluster, ns) as recorder:
        scenario = Runs(real.cluster, ns, recorder)
        yield scenario
        scenario.close()


@pytest.mark.parametrize("on", [0, 1])
def test_a_real_run_shares_a_real_volume_beside_its_real_balloon(
    real: Real, real_runs: Runs, on: int
) -> None:
    s = real_runs
    node = real.nodes.nodes[on]
    realnode.local_volume(real.cluster, node, f"pv-{uuid.uuid4().hex[:6]}")
    install(real, "policy")
    run = s.start(write_and_read(tr.unique("real"), tr.volume_claim_template()))
    assert s.anchor(run, timeout=120) == node.name
    with real.cluster.api_client() as api:  # as the operator made it, before admission
        template = present(present(client.AppsV1Api(api).read_namespaced_stateful_set(
            balloon_name(run["metadata"]["uid"]), s.ns).spec).template.spec)
    assert [r.name for r in present(template.image_pull_secrets)] == [real_.PULL_SECRET]
    assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded")
    assert_co_located(s, run, node.name, real_.TASKS)
    balloon = s.recorder.balloons(run["metadata"]["uid"])[0]
    assert balloon.node == node.name
    limits = realhost.cgroup_limits(real.cluster, node.cgroup_root, balloon.name, s.ns)
    print(f"the balloon's cgroup: {limits}")
    assert limits == {"cpu_quota_millicores": 10, "memory_bytes": 16 * 2**20}
    assert [p for p in real.nodes.pulled(node.name) if p.image == realimages.balloon()]


def host_volume(real: Real, name: str) -> None:
    """A volume every node can mount (a directory of this host, as a network volume would be to
    any node): nothing in it keeps a run's pods on one node."""
    path = real.cluster.run_dir / "volumes" / name
    path.mkdir(parents=True, exist_ok=True)
    with real.cluster.api_client() as api:
        client.CoreV1Api(api).create_persistent_volume({  # type: ignore[arg-type]
            "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "shared-host",
                     "hostPath": {"path": str(path), "type": "Directory"}},
        })


def test_without_coscheduling_a_run_s_pods_spread_over_the_real_nodes_and_with_it_they_do_not(
    real: Real,
) -> None:
    """Three runs on volumes any node mounts, in a namespace that did not opt in: on a real
    cluster with ReadWriteOnce block volumes, a run spread over two nodes meets Multi-Attach
    errors. The same runs opted in: each on one node.

    Then Tekton's assistant on (`workspaces`, Tekton's default), one more run in each
    namespace (issue 48): both succeed on one node each, the opted-in one's anchored by us (a
    balloon, our term on every pod, not Tekton's), the other's by Tekton's placeholder alone (its
    term on every pod, nothing of ours)."""
    install(real, "policy")
    template = {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "shared-host",
        "resources": {"requests": {"storage": "1Gi"}}}}}
    spread: dict[bool, list[int]] = {}
    with contextlib.ExitStack() as stack:  # both namespaces' runs at once
        made: dict[bool, tuple[Runs, list[dict[str, Any]]]] = {}
        for opted_in in (False, True):
            labels = {names.NAMESPACE_LABEL: "true"} if opted_in else {}
            ns = real_.namespace(real, f"sp-{uuid.uuid4().hex[:6]}", labels)
            s = Runs(real.cluster, ns, stack.enter_context(PodRecorder(real.cluster, ns)))
            stack.callback(s.close)
            made[opted_in] = (s, [])
            for _ in range(3):
                host_volume(real, f"hv-{uuid.uuid4().hex[:6]}")
                made[opted_in][1].append(s.start(write_and_read(tr.unique("spread"), template)))
        for opted_in, (s, runs) in made.items():
            for run in runs:
                assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded")
            spread[opted_in] = [len({p.node for p in s.recorder.pods(r["metadata"]["uid"])})
                                for r in runs]
        print(f"nodes per run: without coscheduling {spread[False]}, with {spread[True]}")
        assert spread[True] == [1, 1, 1]
        assert max(spread[False]) == 2
        beside_tekton_s_assistant(real, {o: s for o, (s, _) in made.items()}, template)


def beside_tekton_s_assistant(real: Real, runs: dict[bool, Runs], volume: dict[str, Any]) -> None:
    """One run in each namespace (opted in: True) with Tekton's assistant on, its default mode."""
    tekton_cluster.configure(real.cluster, {"coschedule": "workspaces"})
    try:
        started: dict[bool, dict[str, Any]] = {}
        for opted_in, s in runs.items():
            host_volume(real, f"hv-{uuid.uuid4().hex[:6]}")
            started[opted_in] = s.start(write_and_read(tr.unique("beside"), volume))
        ours, theirs = runs[True], runs[False]
        anchor = ours.anchor(started[True], timeout=120)
        for opted_in, run in started.items():
            assert tr.outcome(runs[opted_in].done(run, timeout=300)) == ("True", "Succeeded")
    finally:
        tekton_cluster.configure(real.cluster, None)
    pods = assert_co_located(ours, started[True], anchor, real_.TASKS)
    assert not [p.name for p in pods if pinned_to_assistant(p.spec)]
    uid = started[False]["metadata"]["uid"]
    pods = theirs.recorder.pods(uid)
    assert sorted(p.task for p in pods) == sorted(real_.TASKS)
    assert len({p.node for p in pods}) == 1, [(p.name, p.node) for p in pods]
    assert all(pinned_to_assistant(p.spec) and not our_terms(p) for p in pods), pods
    assert theirs.recorder.balloons(uid) == [] and theirs.balloons() == []
    for s, run in ((ours, started[True]), (theirs, started[False])):  # as each recorder saw them
        held = [(p.gates, p.node) for p in s.recorder.all()
                if p.labels.get("app.kubernetes.io/component") == "affinity-assistant"
                and p.labels.get("tekton.dev/pipelineRun") == run["metadata"]["name"]]
        assert held, f"Tekton made no placeholder for {run['metadata']['name']}"
        if s is ours:  # held by admission, let go beside the balloon by the leader
            assert set(held) == {((PLACEHOLDER_GATE,), anchor)}, held
        else:
            assert all(gates == () for gates, _ in held), held


def test_policy_and_webhook_mode_both_pin_real_pods(real: Real) -> None:
    """The same run under each admission mode the chart offers; the webhook reached through our
    Service with the chart's TLS."""
    # The order the other scenarios leave and want: the rollout's, next in this file, is webhook
    # mode as this one leaves it (each change of mode is an uninstall and an install).
    for mode in ("policy", "webhook"):
        install(real, mode)
        ns = real_.namespace(real, f"rm-{uuid.uuid4().hex[:6]}", {names.NAMESPACE_LABEL: "true"})
        with PodRecorder(real.cluster, ns) as recorder:
            s = Runs(real.cluster, ns, recorder)
            realnode.local_volume(real.cluster, real.nodes.nodes[0], f"pv-{uuid.uuid4().hex[:6]}")
            run = s.start(write_and_read(tr.unique(mode), tr.volume_claim_template()))
            assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded"), mode
            assert len({p.node for p in recorder.pods(run["metadata"]["uid"])}) == 1
            s.close()


def test_a_rollout_restart_and_a_killed_leader_fail_no_pod_creation_through_the_service(
    real: Real, real_runs: Runs
) -> None:
    """Webhook mode, the webhook reached through the chart's Service (kube-proxy's iptables
    rules, the endpoints the EndpointSlice controller keeps): pods created at a steady rate
    while `kubectl rollout restart` replaces both replicas of the chart's Deployment (each
    drains for the chart's shutdownDrainSeconds) and then the new leader's reconciler is
    killed; real runs meanwhile."""
    s = real_runs
    install(real, "webhook")
    made = []
    for i in range(3):
        realnode.local_volume(real.cluster, real.nodes.nodes[i % 2], f"pv-{uuid.uuid4().hex[:6]}")
        made.append(s.start(write_and_read(tr.unique("roll"), tr.volume_claim_template())))
    trace = RolloutTrace(real.cluster, NAMESPACE, FULLNAME, SELECTOR,
                         real.cluster.logs_dir / f"rollout-{uuid.uuid4().hex[:6]}")
    with trace, PodLoad(real.cluster, s.ns, RATE, dry_run=True) as load:
        real.cluster.wait_for(lambda: len(load.created) >= RATE, timeout=30,
                              what="pods admitted before the rollout")
        generation = real_.rollout_restart(real)
        trace.note("test", f"rollout restart, generation {generation}")
        real.cluster.wait_for(lambda: real_.rolled(real, generation), timeout=300,
                              what="both replicas replaced")
        led = real.cluster.wait_for(lambda: real_.leader(real), timeout=60, what="a leader")
        killed = real_.kill_reconciler(real, led)
        trace.note("test", f"killed reconciler {killed} of {led}")
        before = len(load.created)
        real.cluster.wait_for(lambda: len(load.created) >= before + 5 * RATE, timeout=60,
                              what="pods admitted after the reconciler was killed")
        real.cluster.wait_for(lambda: len(trace.logged("drained")) >= 2, timeout=120,
                              what="both old replicas drained")
    print(f"{len(load.created)} pods admitted during the rollout, {len(load.failures)} "
          f"refused; killed reconciler {killed} of {led}; timeline in {trace.out}")
    for failure in load.failures:
        print(f"----- around {failure[:200]}\n{trace.around(float(failure.split()[0]))}")
    drained = trace.logged("drained")
    print(f"drains: {drained}")
    assert load.failures == []
    # Each replica the rollout stopped answered until the Service's endpoints dropped it.
    assert [d["why"] for d in drained] == ["drained", "drained"], drained
    for run in made:
        assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded")
        assert len({p.node for p in s.recorder.pods(run["metadata"]["uid"])}) == 1


def test_replicas_keeping_their_own_certificate_serve_the_webhook_through_the_service(
    real: Real,
) -> None:
    """webhook.tls.mode controller in the chart's own pods: the first replica makes the pair
    into its Secret (in /tmp, the pods' only writable place), both serve it, the webhook
    configuration trusts its CA, and a real run is pinned through the Service."""
    install(real, "webhook", {"webhook.tls.mode": "controller"})
    with real.cluster.api_client() as api:
        core = client.CoreV1Api(api)
        try:
            secret = core.read_namespaced_secret(f"{FULLNAME}-webhook-tls", NAMESPACE)
            hooks = client.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(
                FULLNAME).webhooks
            assert {h.client_config.ca_bundle for h in present(hooks)} == {present(secret.data)["ca.crt"]}
            ns = real_.namespace(real, f"own-{uuid.uuid4().hex[:6]}",
                                 {names.NAMESPACE_LABEL: "true"})
            with PodRecorder(real.cluster, ns) as recorder:
                s = Runs(real.cluster, ns, recorder)
                node = real.nodes.nodes[1]
                realnode.local_volume(real.cluster, node, f"pv-{uuid.uuid4().hex[:6]}")
                run = s.start(write_and_read(tr.unique("own"), tr.volume_claim_template()))
                assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded")
                assert_co_located(s, run, node.name, real_.TASKS)
                s.close()
        finally:
            # The Secret is not the release's: gone, a later install in `generate` mode makes its own.
            core.delete_namespaced_secret(f"{FULLNAME}-webhook-tls", NAMESPACE)


def test_a_large_step_image_is_pulled_at_its_size(real: Real) -> None:
    """The image later comparisons pull (hundreds of MB no compression shrinks): in the lab's
    registry, and a node's kubelet pulls it whole, as its size says."""
    name, size = real_.large_image(real)
    assert size > 300 * 10**6, size
    ns = real_.namespace(real, f"big-{uuid.uuid4().hex[:6]}")
    node = real.nodes.nodes[1].name
    with real.cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod(ns, {  # type: ignore[arg-type]
            "metadata": {"name": "big"},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "c", "image": name,
                                     "command": ["sh", "-c", "test -s /data/random"]}]}})
        real.cluster.wait_for(lambda: present(core.read_namespaced_pod("big", ns).status).phase
                              == "Succeeded", timeout=300, what="the large image pulled and run")
    pulls = [p for p in real.nodes.pulled(node) if p.image == name]
    print(f"{name}: {size / 2**20:.0f} MiB in the registry; {node} pulled {pulls}")
    assert [p.bytes for p in pulls] == [size]


# A UID of the kind OpenShift's restricted SCC assigns: the first of a namespace's range, far
# from any image's USER and in no /etc/passwd.
ARBITRARY_UID = 1000680000


def assign_uid_to_our_pods(real: Real, ns: str, uid: int) -> None:
    """What OpenShift's SCC admission does to every pod of a namespace that sets no user: a UID
    of the namespace's range. Here a MutatingAdmissionPolicy does it to the balloons and
    reservation pods of `ns` (the run's own busybox steps keep theirs, for their volume)."""
    name = f"assign-uid-{ns}"
    group, version = "admissionregistration.k8s.io", "v1"
    policy = {
        "apiVersion": f"{group}/{version}", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail", "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE"], "resources": ["pods"]}]},
            "matchConditions": [{"name": "sets-no-user", "expression":
                                 "!has(object.spec.securityContext) || "
                                 "!has(object.spec.securityContext.runAsUser)"}],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{spec: Object.spec{securityContext: "
                f"Object.spec.securityContext{{runAsUser: {uid}}}}}}}"}}]}}
    binding = {
        "apiVersion": f"{group}/{version}", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "matchResources": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "objectSelector": {"matchExpressions": [{
                "key": names.LABEL_COMPONENT, "operator": "In",
                "values": [names.COMPONENT_BALLOON, names.COMPONENT_RESERVATION]}]}}}}
    with real.cluster.api_client() as api:
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        custom.create_cluster_custom_object(group, version, "mutatingadmissionpolicies", policy)
        custom.create_cluster_custom_object(group, version, "mutatingadmissionpolicybindings", binding)

        def applied() -> bool:  # a new policy takes a moment to apply: a dry run shows when
            pod = core.create_namespaced_pod(ns, {  # type: ignore[arg-type]
                "metadata": {"generateName": "probe-",
                             "labels": {names.LABEL_COMPONENT: names.COMPONENT_BALLOON}},
                "spec": {"containers": [{"name": "c", "image": realimages.balloon()}]}},
                dry_run="All")
            context = present(pod.spec).security_context
            return bool(context and context.run_as_user == uid)

        real.cluster.wait_for(applied, timeout=30, what="the UID-assigning policy applied")


def uid_of(real: Real, pod: client.V1Pod) -> list[str]:
    """The real, effective, saved and filesystem UIDs of the pod's first container's process, as
    the kernel sees them."""
    node = next(n for n in real.nodes.nodes if n.name == present(pod.spec).node_name)
    pid = node.process(present(present(present(pod.status).container_statuses)[0].container_id))
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))


def test_the_operator_and_the_balloon_run_under_an_arbitrary_uid_as_openshift_assigns(
    real: Real, real_runs: Runs
) -> None:
    """No UID fixed anywhere: the chart's replicas run, get Ready and lead under the UID the
    chart is given (as a namespace's range would have it), and a run's balloon, whose spec sets
    no user, runs under the one admission assigns, as OpenShift's restricted SCC would."""
    s = real_runs
    install(real, "policy", {"podSecurityContext": {"runAsUser": ARBITRARY_UID}})
    pods = realnode.wait_pods_ready(real.cluster, NAMESPACE, SELECTOR, 2)
    for pod in pods:
        assert uid_of(real, pod) == [str(ARBITRARY_UID)] * 4, name_of(pod)
    assert real.cluster.wait_for(lambda: real_.leader(real), timeout=60, what="a leader")

    assign_uid_to_our_pods(real, s.ns, ARBITRARY_UID + 1)
    real_.wait_pinning(real, s.ns)
    node = real.nodes.nodes[0]
    realnode.local_volume(real.cluster, node, f"pv-{uuid.uuid4().hex[:6]}")
    run = s.start(write_and_read(tr.unique("uid"), tr.volume_claim_template()))
    assert s.anchor(run, timeout=120) == node.name
    selector = (f"{names.LABEL_RUN_UID}={run['metadata']['uid']},"
                f"{names.LABEL_COMPONENT}={names.COMPONENT_BALLOON}")
    (balloon,) = realnode.wait_pods_ready(real.cluster, s.ns, selector, 1, timeout=120)
    assert present(present(balloon.spec).security_context).run_as_user == ARBITRARY_UID + 1  # not ours: assigned
    assert present(present(balloon.spec).security_context).run_as_non_root is True
    assert uid_of(real, balloon) == [str(ARBITRARY_UID + 1)] * 4
    assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded")
    assert_co_located(s, run, node.name, real_.TASKS)
