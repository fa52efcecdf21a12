"""Says which Kubernetes and Tekton releases the operator runs with, and whether they were
tested: once at start, and again whenever Tekton's version changes (an upgrade in place).
Never refuses to run: the verdicts are core/model/versions.py's."""

from __future__ import annotations

import structlog

from controller.core.model import versions
from controller.kube.clusterview import Facts
from controller.metrics import Metrics

log = structlog.get_logger(__name__)


class Versions:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._shown: dict[str, str] = {}  # component -> the version last said

    def kubernetes(self, server_version: str | None) -> versions.Verdict:
        """The API server's gitVersion, as read at start (None if it could not be read)."""
        return self._say(versions.kubernetes(server_version))

    def on_facts(self, old: Facts, new: Facts) -> None:
        """ClusterView listener: Tekton's pipelines-info, once it is synced and when it changes."""
        if new.synced and (not old.synced or new.tekton_version != old.tekton_version):
            self._say(versions.tekton(new.tekton_version))

    def _say(self, verdict: versions.Verdict) -> versions.Verdict:
        if self._shown.get(verdict.component) == verdict.version:
            return verdict
        before = self._shown.get(verdict.component)
        if before is not None:
            self.metrics.version_tested.remove(verdict.component, before)
        self._shown[verdict.component] = verdict.version
        self.metrics.version_tested.labels(verdict.component, verdict.version).set(
            1 if verdict.tested else 0)
        if verdict.tested:
            log.info(verdict.message, component=verdict.component, version=verdict.version)
        else:
            log.warning(verdict.message, component=verdict.component, version=verdict.version)
        return verdict
