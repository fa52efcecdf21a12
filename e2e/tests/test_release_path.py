"""The release path on real nodes, as a platform team meets it: `make release` pushes the image
and the chart to a registry (the lab's: TLS, credentials), and the team installs from there with
`helm install oci://... --version`, setting only the registry their nodes pull from and the pull
secret. One label on a namespace, a run co-located on a real volume; then the next version,
released in the test, upgraded to while runs are in flight.

The nodes reach the lab's registry under the names it mirrors (realimages.REGISTRIES), as a
private mirror of a public registry: the release is pushed to the lab's host under such a name
(e2e.tekton-coscheduler.dev/release), and `image.registry` names the mirror. Each release builds
the image with buildah on the lab's store, from a copy of this checkout at the release's version.

It shares the real-node lab with test_realnode.py (the session's `real` fixture, e2e/tests/
conftest.py): it uninstalls what they installed, and leaves its release for their next install()
to uninstall.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

import controller
from controller.core.basics import names
from e2e.harness import chart
from e2e.harness import real as real_
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import project_image, realimages, realnode
from e2e.harness.cluster.registry import local_env
from e2e.harness.coscheduler import REPO
from e2e.harness.real import Real
from e2e.harness.runs import Runs, assert_co_located
from e2e.harness.tekton_runs import PodRecorder

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.parts("realnode")]

MIRROR = f"{realimages.IMAGE_PREFIX}/release"  # what the nodes pull from
RELEASE, NAMESPACE, PULL_SECRET = real_.RELEASE, real_.NAMESPACE, real_.PULL_SECRET
FIRST = controller.__version__
major, minor, patch = (int(x) for x in FIRST.split("-")[0].split(".")[:3])
SECOND = f"{major}.{minor}.{patch + 1}"


class Publisher:
    """`python -m release` (what `make release` runs) against the lab's registry, with the
    credentials given as users give them: the tools' own login files."""

    def __init__(self, real: Real, work: Path) -> None:
        self.real, self.work = real, work
        self.built: list[str] = []
        self.host = real.registry.host
        self.registry = f"{self.host}/{MIRROR}"
        auth = work / "auth.json"  # buildah's (REGISTRY_AUTH_FILE)
        creds = real.registry.credentials
        auth.write_text(json.dumps({"auths": {self.host: {"auth": creds.auth}}}))
        self.env = local_env(REGISTRY_AUTH_FILE=str(auth),
                             HELM_REGISTRY_CONFIG=str(work / "helm-registry.json"))
        login = subprocess.run(
            [chart.helm(), "registry", "login", self.host, "--username", creds.username,
             "--password-stdin", "--ca-file", str(real.registry.ca)],
            input=creds.password, capture_output=True, text=True, env=self.env, timeout=60)
        assert login.returncode == 0, login.stderr

    def checkout(self, version: str) -> Path:
        """This checkout's files at `version`: the version file and the chart's Chart.yaml
        changed, as the commit before a release changes them."""
        copy = self.work / f"source-{version}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(
            ".venv", ".git", "dist", "build", "__pycache__", "*.egg-info", ".*_cache",
            ".hypothesis"))
        init = copy / "controller" / "__init__.py"
        init.write_text(re.sub(r'(?m)^__version__ = "[^"]+"$', f'__version__ = "{version}"',
                               init.read_text()))
        chart_yaml = copy / "charts" / "tekton-coscheduler" / "Chart.yaml"
        chart_yaml.write_text(re.sub(r'(?m)^(version: |appVersion: ")[^"\n]+', rf"\g<1>{version}",
                                     chart_yaml.read_text()))
        changelog = copy / "CHANGELOG.md"
        if changelog.is_file() and f"## [{version}]" not in changelog.read_text():
            head, _, rest = changelog.read_text().partition("\n## ")
            changelog.write_text(f"{head}\n## [{version}] - made by the release path test\n\n"
                                 f"### Changed\n\n- Nothing: a release to upgrade to.\n\n## {rest}")
        # committed, as a release is made from a commit: its hash is the image's revision
        git = ["git", "-C", str(copy), "-c", "user.name=release", "-c",
               "user.email=release@example.invalid"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", f"Release {version}"]):
            subprocess.run([*git, *args], check=True, capture_output=True, timeout=120)
        return copy

    def release(self, version: str) -> str:
        """The release of `version`, built and pushed; its output."""
        project_image.ensure_base()
        argv = [sys.executable, "-m", "release", "--version", version,
                "--registry", self.registry,
                "--source", str(self.checkout(version)), "--dist", str(self.work / "dist"),
                "--builder", "buildah", "--buildah", shlex.join(project_image.buildah_command()),
                *(f"--build-option={o}" for o in project_image.bud_options()),
                f"--push-option=--cert-dir={self.real.registry.ca.parent}",
                "--helm", chart.helm(), f"--helm-option=--ca-file={self.real.registry.ca}"]
        self.built.append(f"{self.registry}/tekton-coscheduler:{version}")
        out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=self.env,
                             timeout=1800)
        assert out.returncode == 0, f"{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
        return out.stdout

    def timed_release(self, version: str) -> float:
        """The release of `version`, built and pushed; the seconds it took."""
        started = time.monotonic()
        self.release(version)
        return time.monotonic() - started

    def close(self) -> None:
        """The releases' images leave the lab's buildah store (a few hundred MiB each)."""
        for image in self.built:
            subprocess.run([*project_image.buildah_command(), "rmi", "--force", image],
                           capture_output=True, timeout=300)

    def labels(self, version: str) -> dict[str, str]:
        """The OCI labels of the pushed image, as the registry serves its config."""
        out = subprocess.run(
            ["skopeo", "inspect", "--cert-dir", str(self.real.registry.ca.parent),
             "--authfile", self.env["REGISTRY_AUTH_FILE"],
             f"docker://{self.registry}/tekton-coscheduler:{version}"],
            capture_output=True, text=True, env=self.env, timeout=120)
        assert out.returncode == 0, out.stderr
        return dict(json.loads(out.stdout)["Labels"])

    def helm(self, verb: str, version: str, *extra: str) -> None:
        """`helm install|upgrade` from the registry, setting the mirror and the pull secret."""
        chart.run_helm([
            verb, RELEASE, f"oci://{self.registry}/charts/tekton-coscheduler",
            "--version", version, "--namespace", NAMESPACE, "--ca-file", str(self.real.registry.ca),
            "--set", f"image.registry={MIRROR}",
            "--set", f"imagePullSecrets[0].name={PULL_SECRET}",
            "--set", f"config.balloon.imagePullSecrets[0].name={PULL_SECRET}",
            "--wait", "--timeout", "5m", *extra,
        ], env=self.env, kubeconfig=self.real.cluster.kubeconfig)


def admission_objects(publisher: Publisher) -> list[str]:
    """What admits pods in the release as installed (the chart's admission.mode `auto` chose
    by what the API server serves): kind/name of its admission objects."""
    out = chart.run_helm(["get", "manifest", RELEASE, "--namespace", NAMESPACE],
                         env=publisher.env, kubeconfig=publisher.real.cluster.kubeconfig)
    return [f"{d['kind']}/{d['metadata']['name']}" for d in yaml.safe_load_all(out.stdout)
            if d and ("Admission" in d["kind"] or "Webhook" in d["kind"])]


def controller_images(real: Real) -> set[str]:
    return {str(p.spec.containers[0].image)  # type: ignore[union-attr]
            for p in realnode.pods(real.cluster, NAMESPACE, real_.SELECTOR)}


RELEASED = "release path"  # real.mode while this scenario's release is installed


def bare_namespace(real: Real) -> None:
    """The release's namespace with its pull secret and nothing installed: what a scenario of
    test_realnode.py installed in the shared lab goes. real.mode then tells the lab's next
    install() to uninstall first, whatever this scenario's install leaves (even nothing)."""
    if real.mode:
        real_.uninstall(real)
    else:
        real.cluster.create_namespace(NAMESPACE)
        real_.pull_secret(real, NAMESPACE)
    real.mode = RELEASED


def gated(name: str) -> dict[str, Any]:
    """write_and_read whose first task waits until a file `go` is in its volume: a run kept in
    flight until the test lets it go, however long the upgrade takes or however short."""
    body = real_.write_and_read(name, tr.volume_claim_template())
    step = body["spec"]["pipelineSpec"]["tasks"][0]["taskSpec"]["steps"][0]
    path = f"$(workspaces.{tr.SHARED}.path)"
    step["script"] = step["script"].replace(
        "set -e\n", f"set -e\nuntil [ -f {path}/go ]; do sleep 1; done\n", 1)
    assert "until" in step["script"], step["script"]
    return body


def volume(real: Real, node: realnode.RealNode) -> Path:
    """A fresh local volume on the node (each run's claim binds one); its directory."""
    name = f"pv-{uuid.uuid4().hex[:6]}"
    realnode.local_volume(real.cluster, node, name)
    return node.root / "volumes" / name


def let_go(s: Runs, run: dict[str, Any]) -> None:
    """The file a gated() run waits for, put into the volume its claim is bound to (a local
    volume is a directory of this host)."""
    (claim,) = s.claims_of(run)
    pv = s.core.read_persistent_volume(s.wait_bound(claim, timeout=60))
    (Path(pv.spec.local.path) / "go").write_text("")  # type: ignore[union-attr]


def on_its_volume(s: Runs, run: dict[str, Any], anchor: str) -> None:
    """The run's claim is bound to a volume of the node its pods went to."""
    (claim,) = s.claims_of(run)
    assert s.pv_node(claim) == anchor, claim


class Clock:
    """How long each phase took, printed at the end: the scenario's runtime, by its parts."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()
        self.phases: list[tuple[str, float]] = []

    def lap(self, what: str) -> None:
        now = time.monotonic()
        self.phases.append((what, now - self.last))
        self.last = now

    def __str__(self) -> str:
        parts = ", ".join(f"{what} {seconds:.0f} s" for what, seconds in self.phases)
        return f"release path: {time.monotonic() - self.start:.0f} s ({parts})"


@pytest.mark.timeout(2400)  # two image builds (about 90 s each alone, more beside the nodes)
def test_a_release_installs_from_the_registry_runs_and_upgrades_with_runs_in_flight(
    real: Real, tmp_path: Path,
) -> None:
    publisher, clock = Publisher(real, tmp_path), Clock()
    try:
        with ThreadPoolExecutor(1) as background:  # left only once its build is over
            released(real, publisher, tmp_path, clock, background)
    finally:
        publisher.close()
        print(clock)


def released(real: Real, publisher: Publisher, tmp_path: Path, clock: Clock,
             background: ThreadPoolExecutor) -> None:
    said = publisher.release(FIRST)
    print(said)
    labels = publisher.labels(FIRST)
    assert labels["org.opencontainers.image.version"] == FIRST
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert re.match(r"^[0-9a-f]{40}$", labels["org.opencontainers.image.revision"]), labels
    assert (tmp_path / "dist" / f"tekton-coscheduler-{FIRST}.image.cdx.json").is_file()
    clock.lap(f"release {FIRST}")
    # The next version is made while this one is installed and runs (the nodes mostly wait on
    # the API server meanwhile): a release as its maintainers would make it, just sooner.
    second = background.submit(publisher.timed_release, SECOND)

    bare_namespace(real)
    publisher.helm("install", FIRST)
    realnode.wait_pods_ready(real.cluster, NAMESPACE, real_.SELECTOR, 2, timeout=180)
    assert controller_images(real) == {f"{MIRROR}/tekton-coscheduler:{FIRST}"}
    print("installed:", admission_objects(publisher))
    clock.lap("install")

    ns = real_.namespace(real, f"rel-{uuid.uuid4().hex[:6]}", {names.NAMESPACE_LABEL: "true"})
    with PodRecorder(real.cluster, ns) as recorder:
        s = Runs(real.cluster, ns, recorder)
        try:
            real_.wait_pinning(real, ns)
            volume(real, real.nodes.nodes[0])
            run = s.start(real_.write_and_read(tr.unique("release"), tr.volume_claim_template()))
            anchor = s.anchor(run, timeout=120)
            assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded")
            assert_co_located(s, run, anchor, real_.TASKS)
            on_its_volume(s, run, anchor)
            clock.lap("a run")

            built = second.result()
            clock.lap(f"release {SECOND} (built in {built:.0f} s, beside the above)")
            # A run anchored on each node by the first version, held in its first task until
            # the second version alone serves: its other tasks' pods are admitted by that one.
            for n in real.nodes.nodes:
                volume(real, n)
            in_flight = [s.start(gated(tr.unique("flight"))) for _ in real.nodes.nodes]
            anchors = [s.anchor(r, timeout=120) for r in in_flight]
            publisher.helm("upgrade", SECOND)
            realnode.wait_pods_ready(real.cluster, NAMESPACE, real_.SELECTOR, 2, timeout=180)
            real.cluster.wait_for(
                lambda: controller_images(real) == {f"{MIRROR}/tekton-coscheduler:{SECOND}"},
                timeout=180, what=f"only replicas of {SECOND} left")
            clock.lap("upgrade")
            for r in in_flight:  # held at their gates all along
                live: dict[str, Any] = s.custom.get_namespaced_custom_object(
                    *tr.TEKTON, ns, "pipelineruns", r["metadata"]["name"])  # type: ignore[assignment]
                assert tr.outcome(live) is None, tr.succeeded_condition(live)
            # ...and a run anchored by the second version, beside them.
            real_.wait_pinning(real, ns)
            volume(real, real.nodes.nodes[0])
            after = s.start(real_.write_and_read(tr.unique("after"), tr.volume_claim_template()))
            for r in in_flight:
                let_go(s, r)
            for r, anchor in zip(in_flight, anchors, strict=True):
                assert tr.outcome(s.done(r, timeout=300)) == ("True", "Succeeded")
                assert_co_located(s, r, anchor, real_.TASKS)
                on_its_volume(s, r, anchor)
            assert tr.outcome(s.done(after, timeout=300)) == ("True", "Succeeded")
            anchor = s.anchor(after)
            assert_co_located(s, after, anchor, real_.TASKS)
            on_its_volume(s, after, anchor)
            clock.lap("the runs in flight and one after")
        finally:
            s.close()
    with real.cluster.api_client() as api:
        deployment = client.AppsV1Api(api).read_namespaced_deployment(real_.FULLNAME, NAMESPACE)
    assert (deployment.metadata.labels or {})["app.kubernetes.io/version"] == SECOND  # type: ignore[union-attr]
    assert publisher.labels(SECOND)["org.opencontainers.image.version"] == SECOND
