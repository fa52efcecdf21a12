"""tekton-coscheduler as an administrator installs it: the Helm chart on the cluster, and its
controller running on this host with the chart's ServiceAccount identity and the settings the
chart chose (the admission mode: policy where the API server serves it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from e2e.harness import chart
from e2e.harness.cluster import ClusterHandle
from e2e.harness.coscheduler import REPO, Coscheduler


def deploy(
    cluster: ClusterHandle, env: Mapping[str, str] | None = None, source: Path = REPO,
    name: str = "coscheduler", values: Mapping[str, Any] | None = None,
) -> Coscheduler:
    """Installs the chart, starts the controller (with `env` over the test settings), and returns
    once it leads and admission pins TaskRun pods. Stop it with .stop(). `source`: whose chart
    and code (this working tree, or an earlier release's: harness/upgrade.py); `values` over the
    session's chart values."""
    operator = Coscheduler(cluster, env_overrides={"POD_NAMESPACE": chart.NAMESPACE, **(env or {})},
                           name=name, source=source)
    chart.install(cluster, operator.webhook_url, operator.ca_bundle,
                  {**chart.session_values(), **(values or {})},
                  chart_dir=source / "charts" / "tekton-coscheduler")
    operator.env_overrides = {**operator.env_overrides, **chart.settings_of(cluster)}
    operator.kubeconfig = chart.service_account_kubeconfig(
        cluster, cluster.logs_dir / "chart-sa.kubeconfig"
    )
    operator.start()
    operator.wait_effective()
    return operator
