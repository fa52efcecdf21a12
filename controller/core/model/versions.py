"""Which Kubernetes and Tekton releases this release is tested with, and what to say of others.

The tested set is what `make e2e-matrix` runs (e2e/versions.env: MATRIX_KUBERNETES and
MATRIX_TEKTON_PIPELINE; a unit test holds the two together). Outside it the operator still
runs: it says so plainly, once at start and whenever Tekton's version changes, and `check`
says it too. Below the floor (the chart's kubeVersion) something it uses is missing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kubernetes minors of the matrix: upstream's supported releases in late 2026.
TESTED_KUBERNETES = ((1, 35), (1, 36), (1, 37))
# Tekton Pipelines LTS lines of the matrix.
TESTED_TEKTON = ((1, 9), (1, 12), (1, 15))
# The chart's ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) is GA from 1.30.
KUBERNETES_FLOOR = (1, 30)

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Verdict:
    component: str  # "kubernetes" or "tekton"
    version: str  # as the cluster reports it, "" if unknown
    tested: bool
    message: str


def release(text: str | None) -> tuple[int, int] | None:
    """(major, minor) of "v1.36.3", "1.36", "v1.36.3-gke.100", "v1.36.3+k3s1"; else None."""
    match = _RELEASE.match((text or "").strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def _lines(tested: tuple[tuple[int, int], ...], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{major}.{minor}" for major, minor in tested)


def _known(component: str, name: str, text: str | None,
           tested: tuple[tuple[int, int], ...], prefix: str, missing: str
           ) -> tuple[Verdict | None, tuple[int, int], str]:
    """The verdict when the release is unreadable or tested; else None, the release, as shown."""
    found, shown = release(text), (text or "").strip()
    if found is None:
        return Verdict(component, shown, False, f"{name} version unknown ({shown or missing}); "
                       f"tested on {_lines(tested, prefix)}"), (0, 0), shown
    if found in tested:
        return Verdict(component, shown, True,
                       f"{name} {shown}: tested ({_lines(tested, prefix)})"), found, shown
    return None, found, shown


def kubernetes(text: str | None) -> Verdict:
    said, found, shown = _known("kubernetes", "Kubernetes", text, TESTED_KUBERNETES, "",
                                "not reported")
    if said is not None:
        return said
    if found < KUBERNETES_FLOOR:
        return Verdict("kubernetes", shown, False,
                       f"Kubernetes {shown} is older than {_lines((KUBERNETES_FLOOR,))}, the "
                       f"oldest this release supports (the chart refuses it); tested on "
                       f"{_lines(TESTED_KUBERNETES)}")
    side = "older" if found < TESTED_KUBERNETES[0] else "newer"
    return Verdict("kubernetes", shown, False,
                   f"Kubernetes {shown} is {side} than the tested releases "
                   f"({_lines(TESTED_KUBERNETES)}): it should work, but it was not tested")


def tekton(text: str | None) -> Verdict:
    said, found, shown = _known("tekton", "Tekton Pipelines", text, TESTED_TEKTON, "v",
                                "no pipelines-info")
    if said is not None:
        return said
    if TESTED_TEKTON[0] < found < TESTED_TEKTON[-1]:
        where = "between the tested LTS lines"
    else:
        where = "older than" if found < TESTED_TEKTON[0] else "newer than"
        where += " the tested LTS lines"
    return Verdict("tekton", shown, False,
                   f"Tekton Pipelines {shown} is {where} ({_lines(TESTED_TEKTON, 'v')}): it "
                   f"should work, but it was not tested")
