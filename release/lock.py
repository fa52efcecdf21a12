"""requirements.lock read as data: what the image installs, each package pinned with its hashes,
and the software bill of materials (CycloneDX JSON) made from it.

The lock is pip-compile's output (`make lock`): a requirement line `name==version \\`, its
`--hash=sha256:...` lines, then `# via ...` comments naming what asked for it; a package our
pyproject.toml asks for directly says `tekton-coscheduler (pyproject.toml)` there.
"""

from __future__ import annotations

import re
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

DIRECT = "(pyproject.toml)"
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s\\;]+)\s*(\\)?\s*$")
_HASH = re.compile(r"^--hash=(?P<algorithm>sha256|sha384|sha512):(?P<digest>[0-9a-f]+)\s*(\\)?$")


class LockError(ValueError):
    """The lock is not what pip-compile writes: the line and what is wrong with it."""


@dataclass
class Pinned:
    name: str  # canonical: lower case, runs of -_. as one -
    version: str
    hashes: list[tuple[str, str]] = field(default_factory=list)  # (algorithm, hex digest)
    via: list[str] = field(default_factory=list)

    @property
    def direct(self) -> bool:
        return any(v.endswith(DIRECT) for v in self.via)

    @property
    def purl(self) -> str:
        return f"pkg:pypi/{self.name}@{self.version}"


def parse(text: str) -> list[Pinned]:
    """The pinned packages, in the lock's order. Options (`--index-url`, `-r`...) and anything
    else than a pin, its hashes and its comments is refused: the image build would install it."""
    pins: list[Pinned] = []
    in_via = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            comment = line.lstrip("#").strip()
            if pins and raw.startswith("    #"):  # the comments under a pin: `via` and its list
                if comment.startswith("via"):
                    in_via = True
                    comment = comment[len("via"):].strip()
                if in_via and comment:
                    pins[-1].via.append(comment)
            continue
        in_via = False
        if match := _HASH.match(line):
            if not pins:
                raise LockError(f"line {number}: a hash before any pinned package")
            pins[-1].hashes.append((match["algorithm"], match["digest"]))
        elif match := _PIN.match(line):
            pins.append(Pinned(canonicalize_name(match["name"]), match["version"]))
        else:
            raise LockError(f"line {number}: neither `name==version` nor `--hash=...`: {line!r}")
    return pins


def runtime_requirements(pyproject: Path) -> list[Requirement]:
    """pyproject.toml's [project] dependencies: what the installed package needs to run."""
    project = tomllib.loads(pyproject.read_text())["project"]
    return [Requirement(spec) for spec in project.get("dependencies", [])]


def mismatches(pins: list[Pinned], requirements: list[Requirement]) -> list[str]:
    """Why the lock does not install exactly what pyproject.toml asks for (empty: it does)."""
    wanted = {canonicalize_name(r.name): r for r in requirements}
    locked = {p.name: p for p in pins}
    problems = [f"{name} is in pyproject.toml's dependencies, not in the lock"
                for name in sorted(wanted.keys() - locked.keys())]
    problems += [f"{p.name} is locked as a direct dependency, not in pyproject.toml's"
                 for p in pins if p.direct and p.name not in wanted]
    for name, requirement in sorted(wanted.items()):
        pin = locked.get(name)
        if pin is None:
            continue
        if not pin.direct:
            problems.append(f"{name} is not marked `via tekton-coscheduler {DIRECT}`")
        if not requirement.specifier.contains(pin.version, prereleases=True):
            problems.append(f"{name}=={pin.version} is outside pyproject.toml's {requirement}")
    problems += [f"{p.name}=={p.version} has no --hash" for p in pins if not p.hashes]
    return problems


def sbom(pins: list[Pinned], name: str, version: str, created: str,
         licenses: str = "", revision: str = "") -> dict[str, Any]:
    """A CycloneDX 1.5 bill of materials of the image's Python environment: our package and
    every locked one, with the hashes the build checked. The same inputs give the same document
    (its serial number is derived from them), so a release made twice writes it unchanged."""
    purl = f"pkg:pypi/{name}@{version}"
    ours: dict[str, Any] = {"type": "application", "bom-ref": purl, "name": name,
                            "version": version, "purl": purl}
    if licenses:
        ours["licenses"] = [{"expression": licenses}]
    components = [{
        "type": "library", "bom-ref": p.purl, "name": p.name, "version": p.version,
        "purl": p.purl, "scope": "required",
        "hashes": [{"alg": {"sha256": "SHA-256", "sha384": "SHA-384", "sha512": "SHA-512"}[a],
                    "content": d} for a, d in p.hashes],
    } for p in pins]
    direct = [p.purl for p in pins if p.direct]
    dependencies = [{"ref": ours["bom-ref"], "dependsOn": direct}]
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"{name}@{version}#{revision}:"
                        + ",".join(f"{p.purl}" for p in pins))
    return {
        "bomFormat": "CycloneDX", "specVersion": "1.5", "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {"timestamp": created, "component": ours,
                     "properties": [{"name": "vcs.revision", "value": revision}] if revision
                     else []},
        "components": components, "dependencies": dependencies,
    }
