"""`make release VERSION=x.y.z REGISTRY=host[:port][/path]`: the image and the chart of one
version, built from this checkout and pushed to one registry.

    python -m release --version 0.1.0 --registry ghcr.io/tekton-coscheduler [--dry-run]

1. Refuses a version other than the one version of the project (controller/__init__.py's
   `__version__`; pyproject.toml takes it from there) or than the chart's committed Chart.yaml,
   and one CHANGELOG.md has no section for.
2. Builds the image REGISTRY/tekton-coscheduler:VERSION from the Dockerfile (buildah, as the
   e2e lab does, or docker), its OCI labels (source, version, revision, created...) as build
   arguments; writes beside it dist/tekton-coscheduler-VERSION.image.cdx.json, the CycloneDX
   bill of materials of its Python environment (requirements.lock and our package).
3. Packages the chart (`helm package --version VERSION --app-version VERSION`): its image tag
   defaults to the appVersion, and `image.registry` to REGISTRY.
4. Pushes the image, and the chart as an OCI artifact to oci://REGISTRY/charts.

Credentials are the tools' own: `buildah login` / `docker login` and `helm registry login`
(or REGISTRY_AUTH_FILE), never arguments or files here. Run again, it does the same again: the
same labels (created is the commit's time), the same SBOM, the same chart, pushed under the
same names. --dry-run prints every step and runs none.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from release import lock

REPO = Path(__file__).resolve().parents[1]
NAME = "tekton-coscheduler"
# SemVer 2, as Helm requires of a chart's version.
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
# host[:port][/path], the chart's image.registry (values.schema.json says the same).
REGISTRY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?(/[a-z0-9._-]+)*$")
_VERSION_LINE = re.compile(r'^__version__ = "([^"]+)"$', re.MULTILINE)
_REGISTRY_LINE = re.compile(r"^(image:\n(?:  .*\n|\s*\n)*?  registry:)[^\n]*$", re.MULTILINE)


class Refused(Exception):
    """The release cannot be made as asked: what to change."""


def project_version(repo: Path) -> str:
    """The one version: controller/__init__.py's `__version__`."""
    found = _VERSION_LINE.findall((repo / "controller" / "__init__.py").read_text())
    if len(found) != 1:
        raise Refused("controller/__init__.py has no single `__version__ = \"x.y.z\"` line")
    return str(found[0])


def chart_dir(repo: Path) -> Path:
    return repo / "charts" / NAME


def committed_copies(repo: Path) -> dict[str, str]:
    """Every copy of the version committed beside the version file: each must equal it."""
    chart = yaml.safe_load((chart_dir(repo) / "Chart.yaml").read_text())
    return {"charts/tekton-coscheduler/Chart.yaml version": str(chart["version"]),
            "charts/tekton-coscheduler/Chart.yaml appVersion": str(chart["appVersion"])}


def stamp_registry(values: str, registry: str) -> str:
    """values.yaml with image.registry set to `registry`, its comments kept."""
    stamped, count = _REGISTRY_LINE.subn(lambda m: f"{m[1]} {registry}", values)
    if count != 1:
        raise Refused("values.yaml has no `registry:` line in its `image:` block")
    return stamped


@dataclass(frozen=True)
class Release:
    version: str
    registry: str
    repo: Path
    dist: Path
    revision: str
    created: str  # RFC 3339, the commit's time: the same on every run
    source_url: str
    licenses: str
    title: str
    description: str

    @property
    def image(self) -> str:
        return f"{self.registry}/{NAME}:{self.version}"

    @property
    def chart_package(self) -> Path:
        return self.dist / f"{NAME}-{self.version}.tgz"

    @property
    def sbom(self) -> Path:
        return self.dist / f"{NAME}-{self.version}.image.cdx.json"

    def labels(self) -> dict[str, str]:
        """The Dockerfile's build arguments: its org.opencontainers.image.* labels."""
        return {"OCI_SOURCE": self.source_url, "OCI_VERSION": self.version,
                "OCI_REVISION": self.revision, "OCI_CREATED": self.created,
                "OCI_LICENSES": self.licenses, "OCI_TITLE": self.title,
                "OCI_DESCRIPTION": self.description}


def _git(repo: Path, *args: str) -> str | None:
    if shutil.which("git") is None:
        return None
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def prepare(version: str, registry: str, repo: Path, dist: Path, allow_dirty: bool,
            source_url: str | None) -> Release:
    """The release asked for, checked: Refused says why it cannot be made."""
    if not SEMVER.match(version):
        raise Refused(f"VERSION={version!r} is not a SemVer version (x.y.z)")
    registry = registry.rstrip("/")
    if not REGISTRY.match(registry):
        raise Refused(f"REGISTRY={registry!r} is not host[:port][/path]")
    ours = project_version(repo)
    if version != ours:
        raise Refused(f"VERSION={version} but the project's version is {ours}: set it in "
                      "controller/__init__.py and charts/tekton-coscheduler/Chart.yaml "
                      "(version, appVersion), add the CHANGELOG entry, commit, then release")
    for where, copy in committed_copies(repo).items():
        if copy != ours:
            raise Refused(f"{where} says {copy}, the project's version is {ours}")
    changelog = repo / "CHANGELOG.md"
    if changelog.is_file() and not re.search(
            rf"(?m)^## \[?{re.escape(version)}\]?(\s|$)", changelog.read_text()):
        raise Refused(f"CHANGELOG.md has no `## [{version}]` section: say what it changes")
    revision = _git(repo, "rev-parse", "HEAD")
    dirty = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
    if (revision is None or dirty) and not allow_dirty:
        raise Refused("the checkout has uncommitted changes (or is no git checkout): the image's "
                      "revision label would not say what it holds (--allow-dirty to go on)")
    committed = _git(repo, "log", "-1", "--format=%ct")
    when = datetime.fromtimestamp(int(committed), UTC) if committed else datetime.now(UTC)
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    chart = yaml.safe_load((chart_dir(repo) / "Chart.yaml").read_text())
    url = source_url or _git(repo, "remote", "get-url", "origin") or str(chart.get("home", ""))
    return Release(
        version=version, registry=registry, repo=repo, dist=dist,
        revision=(revision or "unknown") + ("-dirty" if dirty else ""),
        created=when.strftime("%Y-%m-%dT%H:%M:%SZ"), source_url=url,
        licenses=str(project.get("license", "")), title=NAME,
        description=str(project.get("description", "")),
    )


@dataclass(frozen=True)
class Tools:
    builder: str  # buildah | docker
    buildah: tuple[str, ...]  # the buildah command with its global options (--root...)
    build_options: tuple[str, ...]  # more `buildah bud` / `docker build` options
    push_options: tuple[str, ...]  # more `buildah push` options (--cert-dir, --tls-verify)
    helm: str
    helm_options: tuple[str, ...]  # more `helm push` options (--ca-file, --plain-http)


@dataclass(frozen=True)
class Step:
    what: str
    argv: tuple[str, ...] = ()
    action: Callable[[], None] | None = None


def steps(release: Release, tools: Tools, push: bool) -> list[Step]:
    build_args = [a for k, v in release.labels().items() for a in ("--build-arg", f"{k}={v}")]
    dockerfile, context = str(release.repo / "Dockerfile"), str(release.repo)
    if tools.builder == "buildah":
        build = (*tools.buildah, "bud", *tools.build_options, *build_args, "-t", release.image,
                 "-f", dockerfile, context)
        push_image = (*tools.buildah, "push", *tools.push_options, release.image,
                      f"docker://{release.image}")
    else:
        build = ("docker", "build", *tools.build_options, *build_args, "-t", release.image,
                 "-f", dockerfile, context)
        push_image = ("docker", "push", release.image)
    staged = release.dist / "chart" / NAME
    found = [
        Step(f"build the image {release.image}", build),
        Step(f"write its bill of materials {release.sbom}", action=lambda: write_sbom(release)),
        Step(f"stage the chart in {staged}, image.registry: {release.registry}",
             action=lambda: stage_chart(release, staged)),
        Step(f"package the chart {release.chart_package}",
             (tools.helm, "package", str(staged), "--version", release.version,
              "--app-version", release.version, "--destination", str(release.dist))),
    ]
    if push:
        found += [
            Step(f"push the image to {release.registry}", push_image),
            Step(f"push the chart to oci://{release.registry}/charts",
                 (tools.helm, "push", str(release.chart_package),
                  f"oci://{release.registry}/charts", *tools.helm_options)),
        ]
    return found


def write_sbom(release: Release) -> None:
    pins = lock.parse((release.repo / "requirements.lock").read_text())
    document = lock.sbom(pins, NAME, release.version, release.created, release.licenses,
                         release.revision)
    release.sbom.parent.mkdir(parents=True, exist_ok=True)
    release.sbom.write_text(json.dumps(document, indent=2) + "\n")


def stage_chart(release: Release, staged: Path) -> None:
    """A copy of the chart whose image.registry names the registry of this release."""
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(chart_dir(release.repo), staged)
    values = staged / "values.yaml"
    values.write_text(stamp_registry(values.read_text(), release.registry))


def tools_from(args: argparse.Namespace) -> Tools:
    builder = args.builder
    if builder == "auto":
        builder = "buildah" if shutil.which("buildah") else "docker" if shutil.which(
            "docker") else ""
    return Tools(builder=builder, buildah=tuple(shlex.split(args.buildah)),
                 build_options=tuple(args.build_option), push_options=tuple(args.push_option),
                 helm=args.helm, helm_options=tuple(args.helm_option))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m release", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", required=True, help="x.y.z: must be the project's version")
    p.add_argument("--registry", required=True, help="host[:port][/path] to push to")
    p.add_argument("--dry-run", action="store_true", help="print the steps, run none")
    p.add_argument("--no-push", dest="push", action="store_false",
                   help="build and package only")
    p.add_argument("--allow-dirty", action="store_true",
                   help="release uncommitted changes (the revision label says -dirty)")
    p.add_argument("--dist", type=Path, default=REPO / "dist", help="where the files go")
    p.add_argument("--source", type=Path, default=REPO, help="the checkout to release")
    p.add_argument("--source-url", help="the org.opencontainers.image.source label "
                   "(default: git's origin, else Chart.yaml's home)")
    p.add_argument("--builder", choices=["auto", "buildah", "docker"], default="auto")
    p.add_argument("--buildah", default="buildah",
                   help="the buildah command, with global options (--root ...)")
    p.add_argument("--build-option", action="append", default=[], metavar="OPTION",
                   help="one more option of `buildah bud` / `docker build` (repeatable)")
    p.add_argument("--push-option", action="append", default=[], metavar="OPTION",
                   help="one more option of `buildah push` (repeatable)")
    p.add_argument("--helm", default="helm", help="the helm binary")
    p.add_argument("--helm-option", action="append", default=[], metavar="OPTION",
                   help="one more option of `helm push` (repeatable: --ca-file=...)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        release = prepare(args.version, args.registry, args.source.resolve(),
                          args.dist.resolve(), args.allow_dirty, args.source_url)
        tools = tools_from(args)
        if not tools.builder:
            raise Refused("neither buildah nor docker is on PATH")
    except Refused as refused:
        print(f"release refused: {refused}", file=sys.stderr)
        return 2
    print(f"release {release.version} of {release.revision} ({release.created}) "
          f"to {release.registry}" + (" (dry run: nothing is run)" if args.dry_run else ""))
    for number, step in enumerate(steps(release, tools, args.push), 1):
        print(f"{number}. {step.what}")
        if step.argv:
            print(f"   $ {shlex.join(step.argv)}")
        if args.dry_run:
            continue
        if step.action is not None:
            step.action()
        else:
            done = subprocess.run(step.argv)
            if done.returncode != 0:
                print(f"release failed at step {number} ({step.what}): exit {done.returncode}",
                      file=sys.stderr)
                return 1
    if not args.dry_run:
        print(f"released {release.image} and oci://{release.registry}/charts/{NAME} "
              f"{release.version}" if args.push else f"built {release.image} and "
              f"{release.chart_package}, pushed nothing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
