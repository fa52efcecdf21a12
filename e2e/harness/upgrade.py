"""Upgrades with runs in flight: the previous release (PREVIOUS_RELEASE in e2e/versions.env, a
commit of this repository) and the working tree, each as its chart and its operator process.

A release's source is taken from git history into the cache; its chart goes through the same
post-renderer as ours and its operator runs from that source. A swap is what a one-replica
Deployment's update does: the old process stops (handing its Lease back), the new one starts
in its place (same webhook address and certificate, which the chart's configuration names).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from e2e.harness import chart, release
from e2e.harness.cluster import ClusterHandle, read_versions
from e2e.harness.cluster.versions import cache_dir
from e2e.harness.coscheduler import REPO, Coscheduler


def previous_source() -> Path:
    """The repository's files at PREVIOUS_RELEASE (git archive), kept in the cache."""
    commit = read_versions()["PREVIOUS_RELEASE"]
    dest = cache_dir() / "releases" / commit
    if (dest / ".complete").exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "-C", str(REPO), "archive", commit], stdout=archive, check=True)
        archive.seek(0)
        subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive, check=True)
    (dest / ".complete").write_text(commit + "\n")
    return dest


def install(cluster: ClusterHandle, source: Path) -> Coscheduler:
    """A fresh install of that release: its chart, its operator leading."""
    return release.deploy(cluster, source=source, name="release-0")


def upgrade(cluster: ClusterHandle, old: Coscheduler, source: Path) -> Coscheduler:
    """helm upgrade to the chart of `source`, then its operator in the old one's place."""
    chart.install(cluster, old.webhook_url, old.ca_bundle, chart.session_values(), upgrade=True,
                  chart_dir=source / "charts" / "tekton-coscheduler")
    return _swap(cluster, old, source, chart.settings_of(cluster))


def rollback(cluster: ClusterHandle, old: Coscheduler, source: Path, revision: int = 1
             ) -> Coscheduler:
    """helm rollback to `revision` (the release `source` installed), and its operator back."""
    chart.run_helm(["rollback", chart.RELEASE, str(revision), "--namespace", chart.NAMESPACE],
                   kubeconfig=cluster.kubeconfig)
    return _swap(cluster, old, source, {})


def _swap(cluster: ClusterHandle, old: Coscheduler, source: Path, settings: dict[str, str]
          ) -> Coscheduler:
    generation = int(old.name.rsplit("-", 1)[1]) + 1
    new = Coscheduler(cluster, env_overrides={**old.env_overrides, **settings},
                      name=f"release-{generation}",
                      kubeconfig=old.kubeconfig, tls_files=(old.cert, old.key), source=source)
    new.webhook_port, new.ca = old.webhook_port, old.ca
    old.stop()
    new.start()
    cluster.wait_for(new.leads, timeout=60, what=f"the operator of {source} leads")
    return new
