"""`make e2e-matrix`: the core e2e subset on every supported Kubernetes and Tekton release.

python -m e2e.tools.matrix [--plan full|reduced] [--only K8S/TEKTON ...] [--out build]

The subset is the tests marked `matrix` (pytest -m matrix): co-location on a volumeClaimTemplate
and on a pre-bound claim, opt-in and opt-out, the anchor's failover off a node that goes away,
`check`'s verdict, and the admission parity cases. Each cell is one fresh local control plane
of that Kubernetes with that Tekton (e2e/build.sh builds them first; E2E_<KEY> picks them):

- full (the default): every Kubernetes of MATRIX_KUBERNETES with every Tekton of
  MATRIX_TEKTON_PIPELINE (e2e/versions.env); reduced: every Kubernetes with the newest Tekton
  and every Tekton with the suite's Kubernetes;
- plus, on each Kubernetes that serves MutatingAdmissionPolicy only as v1beta1, one cell where
  its administrator turned v1beta1 on and the chart runs in policy mode (with the newest Tekton);
- plus one cell with Tekton's feature flags as Tekton ships them (the suite's Kubernetes, the
  newest Tekton, E2E_TEKTON_DEFAULTS=1): its affinity assistant on (`coschedule: workspaces`)
  in every scenario, where the other cells turn it off and switch it on where a scenario asks.

Admission modes per cell: the chart's `auto` takes policy mode where v1 is served (1.36+) and
the webhook elsewhere. The parity cases hold the decision table against every mode the cell
runs, and policy and webhook to identical pods where both run (read from the JUnit report: the
policy-only parity tests ran there, and were skipped elsewhere). Prints a table, writes
build/e2e-matrix.json, the table as Markdown (build/e2e-matrix.md, for
docs/user-guide/compatibility.md) and each cell's JUnit XML under build/e2e-matrix/. Last line:
`matrix: N/M cells green (Kubernetes ... x Tekton ...)`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from e2e.harness.cluster import read_versions
from e2e.harness.cluster.versions import BUILD_SCRIPT

REPO = BUILD_SCRIPT.parents[1]
BETA_FLAGS = ("--feature-gates=MutatingAdmissionPolicy=true "
              "--runtime-config=admissionregistration.k8s.io/v1beta1=true")
# Runs only where a policy and a webhook both mutate (skipped on a webhook-only cell).
POLICY_AND_WEBHOOK = "test_admission_parity::test_the_namespace_policys_topology_key_in_both_modes"


@dataclass
class Cell:
    kubernetes: str
    tekton: str
    beta_policy: bool = False  # v1beta1 MutatingAdmissionPolicy on, chart in policy mode
    tekton_defaults: bool = False  # Tekton's feature flags untouched: its assistant on
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    modes: str = ""
    failures: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return (f"{self.kubernetes}-{self.tekton}" + ("-v1beta1" if self.beta_policy else "")
                + ("-tekton-defaults" if self.tekton_defaults else ""))

    @property
    def green(self) -> bool:
        return self.passed > 0 and self.failed == 0

    def env(self) -> dict[str, str]:
        env = {**os.environ, "E2E_KUBERNETES_VERSION": self.kubernetes,
               "E2E_TEKTON_PIPELINE_VERSION": self.tekton}
        if self.beta_policy:
            env |= {"E2E_APISERVER_FLAGS": BETA_FLAGS, "E2E_ADMISSION_MODE": "policy"}
        if self.tekton_defaults:
            env["E2E_TEKTON_DEFAULTS"] = "1"
        return env


def minor(version: str) -> int:
    return int(version.lstrip("v").split(".")[1])


def plan(kind: str) -> list[Cell]:
    pins = read_versions()
    kubes, tektons = pins["MATRIX_KUBERNETES"].split(), pins["MATRIX_TEKTON_PIPELINE"].split()
    if kind == "full":
        cells = [Cell(k, t) for k in kubes for t in tektons]
    else:
        newest, default_kube = tektons[-1], pins["KUBERNETES_VERSION"]
        cells = [Cell(k, newest) for k in kubes]
        cells += [Cell(default_kube, t) for t in tektons if t != newest]
    cells += [Cell(k, tektons[-1], beta_policy=True) for k in kubes if minor(k) < 36]
    cells.append(Cell(pins["KUBERNETES_VERSION"], tektons[-1], tekton_defaults=True))
    return cells


def run_cell(cell: Cell, out: Path) -> None:
    build = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "etcd", "kubernetes", "kwok", "tekton", "helm"],
        env=cell.env(), capture_output=True, text=True)
    if build.returncode != 0:
        cell.failed, cell.failures = 1, [f"build: {build.stderr.strip().splitlines()[-1:]}"]
        return
    xml = out / f"{cell.name}.xml"
    t0 = time.monotonic()
    with (out / f"{cell.name}.log").open("w") as log:
        subprocess.run(
            [sys.executable, "-m", "pytest", "e2e", "-m", "matrix", "-p", "no:cacheprovider",
             "-q", f"--junitxml={xml}"],
            env=cell.env(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT, timeout=3600)
    cell.seconds = round(time.monotonic() - t0, 1)
    read_junit(cell, xml)


def read_junit(cell: Cell, xml: Path) -> None:
    if not xml.exists():
        cell.failed, cell.failures = 1, ["pytest wrote no report"]
        return
    both_modes = False
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome = {child.tag for child in case}
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        if outcome & {"failure", "error"}:
            cell.failed += 1
            cell.failures.append(name)
        elif "skipped" in outcome:
            cell.skipped += 1
        else:
            cell.passed += 1
            both_modes |= name == POLICY_AND_WEBHOOK
    policy = "policy v1beta1" if cell.beta_policy else "policy v1"
    cell.modes = f"{policy} + webhook" if both_modes else "webhook"


def markdown(cells: list[Cell], wall: float) -> str:
    """The table as docs/user-guide/compatibility.md shows it."""
    rows = ["| Kubernetes | Tekton | admission modes | result | passed / failed / skipped "
            "| minutes |", "| --- | --- | --- | --- | --- | --- |"]
    for c in cells:
        kube = c.kubernetes + (" (MutatingAdmissionPolicy v1beta1 on)" if c.beta_policy else "")
        tekton = c.tekton + (" (feature flags as shipped: assistant on)"
                             if c.tekton_defaults else "")
        rows.append(f"| {kube} | {tekton} | {c.modes} | {'pass' if c.green else 'FAIL'} | "
                    f"{c.passed} / {c.failed} / {c.skipped} | {c.seconds / 60:.1f} |")
    green = sum(c.green for c in cells)
    rows.append(f"\n{datetime.date.today().isoformat()}: {green}/{len(cells)} cells green, "
                f"{wall / 60:.0f} minutes.")
    return "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.tools.matrix", description=__doc__)
    parser.add_argument("--plan", choices=["full", "reduced"], default="full")
    parser.add_argument("--only", nargs="*", default=[],
                        help="cells to run, by name (v1.35.4-v1.15.0, ...-v1beta1, "
                             "...-tekton-defaults)")
    parser.add_argument("--out", type=Path, default=Path("build"))
    args = parser.parse_args()
    cells = [c for c in plan(args.plan) if not args.only or c.name in args.only]
    cells_dir = args.out / "e2e-matrix"
    cells_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    for cell in cells:
        print(f"[{time.strftime('%H:%M:%S')}] {cell.name}: running", flush=True)
        run_cell(cell, cells_dir)
        state = "green" if cell.green else "RED"
        print(f"[{time.strftime('%H:%M:%S')}] {cell.name}: {state} ({cell.passed} passed, "
              f"{cell.failed} failed, {cell.skipped} skipped, {cell.seconds:.0f} s)", flush=True)
    wall = time.monotonic() - t0
    print(f"\n{'Kubernetes':11} {'Tekton':8} {'admission modes':26} {'result':7} "
          f"{'passed/failed/skipped':>22} {'minutes':>8}")
    for c in cells:
        tekton = c.tekton + ("*" if c.tekton_defaults else "")
        print(f"{c.kubernetes:11} {tekton:8} {c.modes:26} {'pass' if c.green else 'FAIL':7} "
              f"{f'{c.passed}/{c.failed}/{c.skipped}':>22} {c.seconds / 60:8.1f}")
        for failure in c.failures:
            print(f"    failed: {failure}")
    if any(c.tekton_defaults for c in cells):
        print("* Tekton's feature flags as shipped: its affinity assistant on")
    (args.out / "e2e-matrix.md").write_text(markdown(cells, wall))
    (args.out / "e2e-matrix.json").write_text(json.dumps({
        "date": datetime.date.today().isoformat(), "plan": args.plan,
        "wall_seconds": round(wall), "cells": [asdict(c) | {"green": c.green} for c in cells],
    }, indent=2))
    kubes = sorted({c.kubernetes for c in cells}, key=minor)
    tektons = sorted({c.tekton for c in cells}, key=minor)
    green = sum(c.green for c in cells)
    print(f"matrix: {green}/{len(cells)} cells green (Kubernetes {', '.join(kubes)} x Tekton "
          f"{', '.join(tektons)}) in {wall / 60:.0f} min")
    return 0 if green == len(cells) else 1


if __name__ == "__main__":
    sys.exit(main())
