"""Says when Tekton's own affinity assistant is switched on, and when it is off again.

With the assistant on, Tekton pins a run's pods to its own placeholder, so balloons would fight
it: core/placement/reconcile.py makes none (unless told to ignore it) and this module says why,
once, on Tekton's feature-flags ConfigMap, where the administrator who switched it on will look."""

from __future__ import annotations

from typing import Any

import structlog

from controller.core.basics.actions import Say, Unsay
from controller.core.basics.notices import Notice
from controller.core.model import tekton
from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator.executor import Executor
from controller.settings import Settings

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
