"""tekton-coscheduler as a host process against a test cluster, its webhook called by the real
kube-apiserver through a MutatingWebhookConfiguration registered by URL on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from controller.core.basics import names
from controller.faces import webhook
from e2e.harness.cluster import ClusterHandle, crds, present
from e2e.harness.cluster.processes import ManagedProcess, free_port, http_ok, wait_until

REPO = Path(__file__).resolve().parents[2]
WEBHOOK_NAME = "tekton-coscheduler-e2e"


def install_crds(cluster: ClusterHandle) -> None:
    paths = sorted((REPO / "crds").glob("*.yaml"))
    crds.apply(cluster, [doc for path in paths for doc in crds.documents(path)])


def project_secret(data: Mapping[str, str], directory: Path) -> None:
    """Writes a Secret's data (base64 values) as the kubelet updates a secret volume: the files
    go to a fresh hidden directory, swapped in at once by renaming the `..data` symlink, and each
    key is a symlink through it. A reader never sees half a rotation."""
    directory.mkdir(parents=True, exist_ok=True)
    fresh = directory / f"..{time.time_ns()}"
    fresh.mkdir()
    for key, value in data.items():
        (fresh / key).write_bytes(base64.b64decode(value))
    staged = directory / "..data_tmp"
    staged.unlink(missing_ok=True)
    staged.symlink_to(fresh.name)
    previous = (directory / "..data").resolve() if (directory / "..data").exists() else None
    os.replace(staged, directory / "..data")
    for key in data:
        if not (directory / key).is_symlink():
            (directory / key).symlink_to(Path("..data") / key)
    if previous is not None and previous != fresh.resolve():
        shutil.rmtree(previous)


@dataclass
class Coscheduler:
    """The operator process; restartable, so tests can kill it mid-run."""

    cluster: ClusterHandle
    env_overrides: Mapping[str, str] = field(default_factory=dict)
    # Distinct per replica: its certificate files and logs live under this name.
    name: str = "coscheduler"
    # Whose identity the process uses: the chart's ServiceAccount in the e2e suite.
    kubeconfig: Path | None = None
    # Serving certificate and key made elsewhere (cert-manager); else a test CA issues them.
    tls_files: tuple[Path, Path] | None = None
    process: ManagedProcess | None = None
    # Whose code runs: this working tree, or another release's source (harness/upgrade.py).
    source: Path = REPO

    def __post_init__(self) -> None:
        self.dir = self.cluster.logs_dir / self.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA()
        if self.tls_files is not None:
            self.cert, self.key = self.tls_files
        else:
            cert = self.ca.issue_cert("127.0.0.1", "localhost")
            self.cert, self.key = self.dir / "tls.crt", self.dir / "tls.key"
            cert.cert_chain_pems[0].write_to_path(str(self.cert))
            cert.private_key_pem.write_to_path(str(self.key))
        self.webhook_port, self.health_port, self.metrics_port = (
            free_port(),
            free_port(),
            free_port(),
        )
        self.restarts = 0

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}{webhook.PATH}"

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem.bytes()).decode()

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def samples(self) -> list[Sample]:
        """Every sample /metrics exposes, parsed as Prometheus parses it."""
        text = urllib.request.urlopen(self.metrics_url, timeout=10).read().decode()
        return [s for family in text_string_to_metric_families(text) for s in family.samples]

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples named `name` whose labels include `labels` (so a series is
        counted whichever process, server or reconciler, exposed it)."""
        return sum(
            s.value
            for s in self.samples()
            if s.name == name and labels.items() <= s.labels.items()
        )

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COSCHEDULER_")}
        env.update(
            {
                "KUBECONFIG": str(self.kubeconfig or self.cluster.kubeconfig),
                # The Lease holder's identity starts with it: leads() tells replicas apart.
                "POD_NAME": self.name,
                "COSCHEDULER_WEBHOOK_HOST": "127.0.0.1",
                "COSCHEDULER_WEBHOOK_PORT": str(self.webhook_port),
                "COSCHEDULER_WEBHOOK_CERT_FILE": str(self.cert),
                "COSCHEDULER_WEBHOOK_KEY_FILE": str(self.key),
                "COSCHEDULER_METRICS_HOST": "127.0.0.1",
                "COSCHEDULER_HEALTH_PORT": str(self.health_port),
                "COSCHEDULER_METRICS_PORT": str(self.metrics_port),
                "COSCHEDULER_LOG_LEVEL": "DEBUG",
                "COSCHEDULER_RESYNC_INTERVAL": "5",
                # No safety net for settled runs: what the resync repairs in these tests, a
                # watch's event must have asked for (operator/observe.py).
                "COSCHEDULER_RESYNC_SETTLED_ROUNDS": "1000",
                "COSCHEDULER_BALLOON_STUCK_AFTER": "5",
                # A killed leader is replaced within seconds, not the production 15.
                "COSCHEDULER_LEASE_DURATION": "5",
                # Tests stop replicas often; the drain itself is tested with a longer one.
                "COSCHEDULER_SHUTDOWN_DRAIN_SECONDS": "0.5",
                **self.env_overrides,
            }
        )
        return env

    def start(self) -> None:
        exe = Path(sys.executable).with_name("tekton-coscheduler")
        env = self.env()
        if self.source != REPO or not exe.exists():
            argv = [sys.executable, "-m", "controller", "run"]
            env["PYTHONPATH"] = str(self.source)  # before the editable install of this tree
        else:
            argv = [str(exe), "run"]
        self.process = ManagedProcess(
            f"{self.name}-{self.restarts}",
            argv,
            self.cluster.logs_dir / f"{self.name}-{self.restarts}.log",
            env=env,
            cwd=self.source,
        )
        self.restarts += 1
        self.process.start()
        wait_until(
            lambda: http_ok(f"http://127.0.0.1:{self.health_port}/readyz"),
            timeout=60,
            what="tekton-coscheduler /readyz",
            process=self.process,
        )

    def stop(self, grace: float = 10.0) -> None:
        if self.process is not None:
            self.process.stop(grace)
            self.process = None

    def kill(self) -> None:
        """SIGKILL to the server and its reconciler: no chance to clean up, as in a node
        failure."""
        if self.process is not None:
            self.process.kill()
            self.process = None

    def kill_reconciler(self) -> int:
        """SIGKILL to the reconciler child only (a crash, or a lost Lease): the server keeps
        serving and starts a new one. Returns the killed pid."""
        assert self.process is not None
        pids = self.process.children()
        assert pids, "no reconciler process"
        os.kill(pids[0], signal.SIGKILL)
        return pids[0]

    def leads(self) -> bool:
        """Does this replica's reconciler hold the Lease? (read from the Lease itself)"""
        env = self.env()
        name = env.get("COSCHEDULER_LEASE_NAME", "tekton-coscheduler")
        namespace = env.get("POD_NAMESPACE", "default")
        with self.cluster.api_client() as api:
            try:
                lease = client.CoordinationV1Api(api).read_namespaced_lease(name, namespace)
            except ApiException:
                return False
        holder = present(lease.spec).holder_identity or ""
        return bool(self.process) and holder.startswith(f"{self.name}_")

    def wait_effective(self, timeout: float = 60) -> None:
        """Until this replica leads and admission pins pods: in policy mode the reconciler makes
        the policy's bindings only once it leads (a few seconds after start), and a pod created
        before that is not pinned. A dry-run TaskRun pod in an opted-in namespace tells."""
        self.cluster.wait_for(self.leads, timeout=timeout, what=f"{self.name} leads")
        probe_ns = f"probe-{self.name}"
        with self.cluster.api_client() as api:
            core = client.CoreV1Api(api)
            try:
                core.create_namespace({"metadata": {"name": probe_ns,  # type: ignore[arg-type]
                                                    "labels": {names.NAMESPACE_LABEL: "true"}}})
            except ApiException as e:
                if e.status != 409:
                    raise

            def pinned() -> bool:
                pod = {
                    "metadata": {"name": "probe", "labels": {
                        "tekton.dev/pipelineRun": "probe", "tekton.dev/taskRun": "probe-t"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                }
                made = core.create_namespaced_pod(probe_ns, pod, dry_run="All")  # type: ignore[arg-type]
                return present(made.spec).affinity is not None

            self.cluster.wait_for(pinned, timeout=timeout, what="admission pins TaskRun pods")

    def log(self, lines: int = 60) -> str:
        return self.process.tail(lines) if self.process else ""

    def said(self, event: str, lines: int = 2000) -> bool:
        """Whether one of its last log lines (JSON, one object a line) is this event."""
        for line in self.log(lines).splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("event") == event:
                return True
        return False

    def webhook_configuration(
        self,
        name: str = WEBHOOK_NAME,
        label: str = names.NAMESPACE_LABEL,
        url: str | None = None,
        failure_policy: str = "Fail",
    ) -> dict[str, Any]:
        """As the chart's (webhook mode), for the namespaces carrying `label`: its three
        entries, the opted-in namespaces' TaskRun pods, in the others the pods of runs anchored
        before their namespace was switched off (they carry the run's mark), and the opted-in
        namespaces' placeholders of Tekton's assistant."""
        def entry(kind: str) -> dict[str, Any]:
            anchored = kind == "anchored-pods"
            objects: list[dict[str, Any]] = [
                {"key": "tekton.dev/pipelineRun", "operator": "Exists"}]
            if kind == "placeholders":
                objects.append({"key": "app.kubernetes.io/component", "operator": "In",
                                "values": ["affinity-assistant"]})
            else:
                objects.append({"key": "tekton.dev/taskRun", "operator": "Exists"})
            if anchored:
                objects.append({"key": names.LABEL_ANCHORED, "operator": "Exists"})
            return {
                "name": f"{kind}.tekton-coscheduler.dev",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": url or self.webhook_url, "caBundle": self.ca_bundle},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["pods"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchExpressions": [
                    {"key": label, "operator": "NotIn" if anchored else "In",
                     "values": ["true"]}]},
                "objectSelector": {"matchExpressions": objects},
                "sideEffects": "None",
                "matchPolicy": "Equivalent",
                "failurePolicy": failure_policy,
                "reinvocationPolicy": "IfNeeded",
                "timeoutSeconds": 5,
            }

        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [entry("pods"), entry("anchored-pods"), entry("placeholders")],
        }

    def register_webhook(self, **kw: Any) -> str:
        """The webhook configuration (see webhook_configuration), created or replaced."""
        body = self.webhook_configuration(**kw)
        name = body["metadata"]["name"]
        with self.cluster.api_client() as api:
            reg = client.AdmissionregistrationV1Api(api)
            try:
                reg.create_mutating_webhook_configuration(body)  # type: ignore[arg-type]
            except ApiException as e:
                if e.status != 409:
                    raise
                current = reg.read_mutating_webhook_configuration(name)
                body["metadata"]["resourceVersion"] = present(current.metadata).resource_version
                reg.replace_mutating_webhook_configuration(name, body)  # type: ignore[arg-type]
        return str(name)

    def unregister_webhook(self, name: str = WEBHOOK_NAME) -> None:
        with self.cluster.api_client() as api:
            try:
                client.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(
                    name
                )
            except ApiException as e:
                if e.status != 404:
                    raise
