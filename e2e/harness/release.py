"""tekton-coscheduler as an administrator installs it: the Helm chart on the cluster, and its
controller running on this host with the chart's ServiceAccount identity and the settings the
chart chose (the admission mode: policy where the API server serves it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from e2e.harness import chart
from e2e.harness.cluster import ClusterHandle
from e2e.harness.coscheduler import REPO, Coscheduler

# A checkout of another commit (`git worktree add ../old <commit>`) whose operator code the
# session runs, with this tree's chart and harness: how a scenario is seen failing on the code
# before its fix. Unset: this working tree.
CODE = "E2E_OPERATOR_SOURCE"


def code_under_test() -> Path:
    return Path(os.environ.get(CODE) or REPO).resolve()


def deploy(
    cluster: ClusterHandle, env: Mapping[str, str] | None = None, source: Path = REPO,
    name: str = "coscheduler", values: Mapping[str, Any] | None = None,
    code: Path | None = None,
) -> Coscheduler:
    """Installs the chart, starts the controller (with `env` over the test settings), and returns
    once it leads and admission pins TaskRun pods. Stop it with .stop(). `source`: whose chart
    and code (this working tree, or an earlier release's: harness/upgrade.py); `values` over the
    session's chart values; `code`: whose operator runs, if not `source`'s."""
    operator = Coscheduler(cluster, env_overrides={"POD_NAMESPACE": chart.NAMESPACE, **(env or {})},
                           name=name, source=code or source)
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
