"""The Helm chart on a test cluster: rendered and installed with a real helm binary.

A local control plane runs no containers, so the chart's Deployment cannot serve there. A
post-renderer (this module, run as a program by helm) points the chart's
MutatingWebhookConfiguration at the controller running on this host (a URL on 127.0.0.1) and
drops the Deployment, keeping every other field as the chart made it. The host process then
runs with the chart's ServiceAccount identity (a TokenRequest token), so the chart's RBAC is
what it works with.

Two variations, for the tests of the install itself: the Deployment can be kept (kwok's fake
kubelets then "run" its pods, which is enough to show the API server, Pod Security admission,
the scheduler and the Service's endpoints accept what the chart made), and the CA can be left
out (cert-manager's cainjector then has to fill it in; the serving Certificate gets the
loopback address, which the API server dials, as an extra IP SAN).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from e2e.harness.cluster import ClusterHandle, find_binary, present, read_versions

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "tekton-coscheduler"
RELEASE = "tcs"
NAMESPACE = "tekton-coscheduler"
KUBE_VERSION = read_versions()["KUBERNETES_VERSION"].lstrip("v")
# Read by the post-renderer (helm runs it without our arguments' context).
ENV_URL = "E2E_WEBHOOK_URL"
ENV_CA = "E2E_WEBHOOK_CA_BUNDLE"
ENV_KEEP_DEPLOYMENT = "E2E_KEEP_DEPLOYMENT"
ENV_SETTINGS_FILE = "E2E_SETTINGS_FILE"
# Settings the host process takes from the chart's Deployment as rendered (what the chart decided
# from the cluster, such as the admission mode); the harness sets the others (ports, files).
FROM_CHART = ("COSCHEDULER_ADMISSION_MODE", "COSCHEDULER_ADMISSION_POLICY_NAME",
              "COSCHEDULER_ADMISSION_POLICY_VERSION", "COSCHEDULER_RESERVATION_PRIORITY_CLASS_NAME")


def helm() -> str:
    return str(find_binary("helm"))


def _set_args(values: Mapping[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in values.items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    return args


def run_helm(
    args: Sequence[str],
    *,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    kubeconfig: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    if kubeconfig is not None:
        full_env["KUBECONFIG"] = str(kubeconfig)
    out = subprocess.run([helm(), *args], capture_output=True, text=True, env=full_env, timeout=300)
    if check and out.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out


def render(
    values: Mapping[str, Any] | None = None,
    namespace: str = NAMESPACE,
    api_versions: Sequence[str] = (),
    *,
    release: str = RELEASE,
    crds: bool = True,
) -> list[dict[str, Any]]:
    """helm template; api_versions are what the API server would serve beyond helm's defaults
    (for example admissionregistration.k8s.io/v1/MutatingAdmissionPolicy)."""
    extra = [arg for version in api_versions for arg in ("--api-versions", version)]
    out = run_helm(
        [
            "template",
            release,
            str(CHART),
            "--namespace",
            namespace,
            *(["--include-crds"] if crds else []),
            "--kube-version",
            KUBE_VERSION,
            *extra,
            *_set_args(values or {}),
        ]
    )
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def apply(cluster: ClusterHandle, docs: Sequence[Mapping[str, Any]],
          manager: str = "gitops") -> None:
    """What `kubectl apply --server-side` (and Argo CD's server-side sync) does with a rendering:
    each object applied under one field manager, conflicts forced."""
    with cluster.api_client() as api:
        dynamic = DynamicClient(api)  # type: ignore[no-untyped-call]
        for doc in docs:
            resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            dynamic.server_side_apply(resource, body=dict(doc), field_manager=manager,  # type: ignore[no-untyped-call]
                                      force_conflicts=True)


def delete(cluster: ClusterHandle, docs: Sequence[Mapping[str, Any]]) -> None:
    """Deletes what apply() applied (those still there)."""
    with cluster.api_client() as api:
        dynamic = DynamicClient(api)  # type: ignore[no-untyped-call]
        for doc in reversed(docs):
            resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            meta = doc["metadata"]
            with contextlib.suppress(NotFoundError):
                dynamic.delete(resource, name=meta["name"], namespace=meta.get("namespace"))  # type: ignore[no-untyped-call]


def hooks_left_out(docs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rendering without Helm's hooks (`helm test`'s pod): what a GitOps sync applies."""
    return [d for d in docs
            if "helm.sh/hook" not in (d.get("metadata", {}).get("annotations") or {})]


def post_renderer_argv() -> list[str]:
    return [
        "--post-renderer",
        sys.executable,
        "--post-renderer-args",
        "-m",
        "--post-renderer-args",
        __name__,  # this module, as a program (main below)
    ]


def install(
    cluster: ClusterHandle,
    webhook_url: str,
    ca_bundle_b64: str,
    values: Mapping[str, Any] | None = None,
    *,
    upgrade: bool = False,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    keep_deployment: bool = False,
    chart_dir: Path = CHART,
) -> str:
    """helm install (or upgrade) through the post-renderer; an empty ca_bundle_b64 keeps the
    chart's own caBundle, if any (mode secret), or leaves it to the cainjector (certManager).
    settings_of(release) then gives the settings the chart chose for its controller."""
    verb = ["upgrade", "--install"] if upgrade else ["install"]
    settings_file = cluster.logs_dir / f"chart-{release}-settings.json"
    out = run_helm(
        [
            *verb,
            release,
            str(chart_dir),
            "--namespace",
            namespace,
            "--create-namespace",
            "--wait=false",
            *post_renderer_argv(),
            *_set_args(values or {}),
        ],
        env={
            ENV_URL: webhook_url,
            ENV_CA: ca_bundle_b64,
            ENV_KEEP_DEPLOYMENT: "1" if keep_deployment else "",
            ENV_SETTINGS_FILE: str(settings_file),
            "PYTHONPATH": str(REPO),
        },
        kubeconfig=cluster.kubeconfig,
    )
    return out.stdout


def session_values() -> dict[str, Any]:
    """Values the whole e2e session installs with: E2E_ADMISSION_MODE (auto, policy, webhook)
    picks the admission mode, as `make e2e-matrix` does where the chart's auto would not."""
    mode = os.environ.get("E2E_ADMISSION_MODE")
    return {"admission.mode": mode} if mode else {}


def serves_policy_v1(cluster: ClusterHandle) -> bool:
    """Does the API server serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy?"""
    with cluster.api_client() as api:
        found = client.AdmissionregistrationV1Api(api).get_api_resources()
    return any(r.kind == "MutatingAdmissionPolicy" for r in found.resources)


def settings_of(cluster: ClusterHandle, release: str = RELEASE) -> dict[str, str]:
    """The FROM_CHART settings of the release's controller, as its chart rendered them."""
    path = cluster.logs_dir / f"chart-{release}-settings.json"
    found: dict[str, str] = json.loads(path.read_text())
    return found


def uninstall(cluster: ClusterHandle, release: str = RELEASE, namespace: str = NAMESPACE) -> str:
    return run_helm(
        ["uninstall", release, "--namespace", namespace, "--wait"], kubeconfig=cluster.kubeconfig
    ).stdout


def service_account_kubeconfig(
    cluster: ClusterHandle,
    path: Path,
    hours: int = 12,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> Path:
    """A kubeconfig carrying a TokenRequest token of the chart's ServiceAccount."""
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        token = present(core.create_namespaced_service_account_token(
            f"{release}-tekton-coscheduler",
            namespace,
            {"spec": {"expirationSeconds": hours * 3600}},  # type: ignore[arg-type]
        ).status).token
        ca = api.configuration.ssl_ca_cert
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "e2e", "cluster": {"server": cluster.server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": "chart-sa", "user": {"token": token}}],
        "contexts": [{"name": "chart-sa", "context": {"cluster": "e2e", "user": "chart-sa"}}],
        "current-context": "chart-sa",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def for_host_replica(docs: list[dict[str, Any]], webhook_url: str) -> list[dict[str, Any]]:
    """What the post-renderer makes of a rendering: no Deployment, the webhook configuration
    pointed at a replica on this host (its caBundle, if the chart gave one, kept)."""
    return _post_render(docs, webhook_url, "")


def _post_render(
    docs: list[dict[str, Any]],
    url: str,
    ca_bundle: str,
    keep_deployment: bool = False,
    settings: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    host = urlsplit(url).hostname or ""
    out = []
    for doc in docs:
        kind = doc.get("kind")
        if kind == "Deployment" and settings is not None:
            for env in doc["spec"]["template"]["spec"]["containers"][0].get("env", []):
                if env["name"] in FROM_CHART:
                    settings[env["name"]] = env["value"]
        if kind == "Deployment" and not keep_deployment:
            continue  # no container runtime here: the controller runs on the host instead
        if kind == "MutatingWebhookConfiguration" and url:  # none: through the Service
            for hook in doc["webhooks"]:
                # Without a CA of ours, the chart's own (mode secret) or none (certManager) stays.
                ca = ca_bundle or hook["clientConfig"].get("caBundle")
                hook["clientConfig"] = {"url": url, **({"caBundle": ca} if ca else {})}
        if kind == "Certificate" and not doc["spec"].get("isCA") and _is_ip(host):
            doc["spec"]["ipAddresses"] = [*doc["spec"].get("ipAddresses", []), host]
        out.append(doc)
    return out


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def main() -> None:
    docs = [d for d in yaml.safe_load_all(sys.stdin.read()) if d]
    url, ca = os.environ[ENV_URL], os.environ[ENV_CA]
    keep = os.environ.get(ENV_KEEP_DEPLOYMENT) == "1"
    settings: dict[str, str] = {}
    rendered = _post_render(docs, url, ca, keep, settings)
    if os.environ.get(ENV_SETTINGS_FILE):
        Path(os.environ[ENV_SETTINGS_FILE]).write_text(json.dumps(settings))
    sys.stdout.write(yaml.safe_dump_all(rendered, sort_keys=False))


if __name__ == "__main__":
    main()
