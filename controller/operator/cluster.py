"""What the operator says of the cluster it runs in. Which Kubernetes and Tekton releases, and
whether they were tested: once at start, and again whenever Tekton's version changes (an upgrade
in place); never refuses to run: the verdicts are core/model/versions.py's. And when Tekton's
own affinity assistant is switched on, and off (below)."""

from __future__ import annotations

from typing import Any

import structlog

from controller.core.basics.actions import Say, Unsay
from controller.core.basics.notices import Notice
from controller.core.model import tekton, versions
from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator.executor import Executor
from controller.settings import Settings

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


# -- Tekton's own affinity assistant ---------------------------------------------------------------
# Says when Tekton's own affinity assistant is switched on, and when it is off again.
#
# With the assistant on, Tekton pins a run's pods to its own placeholder, so balloons would fight
# it: core/placement/reconcile.py makes none (unless told to ignore it) and this module says why,
# once, on Tekton's feature-flags ConfigMap, where the administrator who switched it on will look.

log = structlog.get_logger(__name__)

REASON = "TektonAffinityAssistantOn"
KEY = "feature-flags"


class Assistant:
    def __init__(self, settings: Settings, metrics: Metrics, executor: Executor) -> None:
        self.settings = settings
        self.metrics = metrics
        self.executor = executor

    def on_facts(self, old: Facts, new: Facts) -> None:
        """ClusterView listener: a Warning when the assistant comes on (once the watches have
        listed, so a restart says a standing problem once more), an info line when it goes."""
        self.metrics.tekton_assistant_on.set(1 if new.assistant_on else 0)
        if new.synced and new.assistant_on and (not old.synced or not old.assistant_on):
            message = self.message(new)
            log.error(message)
            self.executor.do(Say(self.feature_flags(), Notice(REASON, message), KEY))
        elif old.assistant_on and not new.assistant_on and new.synced:
            log.info("Tekton's affinity assistant is off; balloons are made")
            self.executor.do(Unsay(KEY, REASON))

    def message(self, facts: Facts) -> str:
        flags = facts.feature_flags
        what = (
            "missing" if flags is None else f"coschedule={flags.get('coschedule', '(default)')!r}"
        )
        return (
            f"Tekton's affinity assistant is on "
            f"({self.settings.tekton_namespace}/feature-flags {what}); set coschedule: disabled. "
            + (
                "Balloons are still made (COSCHEDULER_IGNORE_TEKTON_ASSISTANT)."
                if facts.ignore_assistant
                else "No balloons are made until it is off."
            )
        )

    def feature_flags(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": tekton.FEATURE_FLAGS_CONFIGMAP,
                "namespace": self.settings.tekton_namespace,
            },
        }
