"""The one executor: every write the operator makes to the API server, and every Event it says,
goes through `Executor.do` as an action (core/basics/actions.py), and comes back as data: what
the call returned, or the error and how kube/errors.py judges it. No other module of the
operator holds a write method of the API client (tests/operator/test_executor.py keeps it so).

Why one place: the Lease's fencing (kube/fencing.py, checked by the connection before a write
leaves) and the judgement of a failure then apply to every write alike, and what the operator
does to the cluster can be read, counted and recorded in one place. NotLeading is not data: it
ends this replica's turn as leader, so it goes on up as it came.

Events are posted by the Notifier, the executor's poster (`Say`, `Unsay`): each (key, reason)
said once per process.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from controller.core.basics import actions
from controller.core.basics.actions import Action
from controller.core.basics.notices import Notice
from controller.core.model import assistant, tekton, versions
from controller.kube import errors
from controller.kube.admission_policies import AdmissionPolicies
from controller.kube.client import ApiError, Kube
from controller.kube.clusterview import Facts
from controller.kube.fencing import NotLeading
from controller.metrics import Metrics
from controller.settings import Settings

log = structlog.get_logger(__name__)



class Notifier:
    """Posts an Event per (key, reason) once per process: replays and resyncs say nothing new.

    After a restart a standing problem is said once more, which is what an operator of the
    cluster wants to see in `kubectl describe` anyway.
    """

    def __init__(self, kube: Kube, remember: int = 20_000) -> None:
        self._kube = kube
        self._said: OrderedDict[Hashable, None] = OrderedDict()
        self._remember = remember

    def tell(self, involved: Mapping[str, Any], notice: Notice, key: Hashable) -> None:
        meta = involved.get("metadata") or {}
        marker = (key, notice.reason)
        if marker in self._said:
            return
        bound = log.bind(
            object=f"{involved.get('kind')}/{meta.get('namespace')}/{meta.get('name')}"
        )
        (bound.warning if notice.warning else bound.info)(notice.message, reason=notice.reason)
        try:
            self._kube.post_event(involved, notice.reason, notice.message, warning=notice.warning)
        except Exception as exc:
            bound.warning("could not post event", reason=notice.reason, error=repr(exc))
            return
        self._said[marker] = None
        while len(self._said) > self._remember:
            self._said.popitem(last=False)

    def forget(self, key: Hashable, reason: str) -> None:
        self._said.pop((key, reason), None)


@dataclass(frozen=True)
class Done:
    """How an action went: its call's answer, or the error it met and its judgement."""

    value: Any = None
    error: Exception | None = None
    failure: errors.Failure | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def api_error(self) -> ApiError | None:
        """The API server's answer, when that is what failed (not a broken connection)."""
        return self.error if isinstance(self.error, ApiError) else None

    def get(self) -> Any:
        """The answer; the error raised again where the caller hands it to the work queue,
        which judges it and tries the object again after its backoff (faces/serial.py)."""
        if self.error is not None:
            raise self.error
        return self.value


class Executor:
    def __init__(self, kube: Kube, notifier: Notifier,
                 policies: AdmissionPolicies | None = None) -> None:
        self.kube = kube
        self.notifier = notifier
        self.policies = policies
        self._calls: dict[type[Any], Callable[[Any], Any]] = {
            actions.Say: lambda a: self.notifier.tell(a.involved, a.notice, a.key),
            actions.Unsay: lambda a: self.notifier.forget(a.key, a.reason),
            actions.MakeBalloon: lambda a: self.kube.create_statefulset(a.manifest),
            actions.ReplanBalloon: lambda a: self.kube.replace_balloon_template(a.manifest),
            actions.DeleteBalloon: lambda a: self.kube.delete_statefulset(a.namespace, a.name,
                                                                     uid=a.uid),
            actions.AnnotateBalloon: lambda a: self.kube.annotate_statefulset(a.namespace, a.name,
                                                                         a.annotations),
            actions.MakePod: lambda a: self.kube.create_pod(a.manifest),
            actions.DeletePod: lambda a: self.kube.delete_pod(a.namespace, a.name, a.uid, a.grace),
            actions.ReleaseGate: lambda a: self.kube.release_pod_gate(a.namespace, a.name, a.uid,
                                                                 a.patch),
            actions.Mark: lambda a: self.kube.patch_tekton(a.namespace, a.plural, a.name, a.patch),
            actions.MakeBudget: lambda a: self.kube.create_pdb(a.manifest),
            actions.DeleteBudget: lambda a: self.kube.delete_pdb(a.namespace, a.name, a.uid),
            actions.WritePolicyStatus: lambda a: self.kube.patch_policy_status(a.namespace, a.name,
                                                                          a.status),
            actions.MakeBinding: lambda a: self._bindings().create_binding(a.body),
            actions.ReplaceBinding: lambda a: self._bindings().replace_binding(
                a.body, a.resource_version),
            actions.DeleteBinding: lambda a: self._bindings().delete_binding(a.name),
        }

    def do(self, action: Action) -> Done:
        try:
            return Done(self._calls[type(action)](action))
        except NotLeading:
            raise
        except Exception as exc:
            return Done(error=exc, failure=errors.classify(exc))

    def _bindings(self) -> AdmissionPolicies:
        if self.policies is None:
            raise RuntimeError("policy mode's bindings asked of an executor without them")
        return self.policies


# -- what the operator says of the cluster ---------------------------------------------------------
# What the operator says of the cluster it runs in. Which Kubernetes and Tekton releases, and
# whether they were tested: once at start, and again whenever Tekton's version changes (an upgrade
# in place); never refuses to run: the verdicts are core/model/versions.py's. And the mode of
# Tekton's own affinity assistant (below).

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
# Its mode, as Tekton's feature-flags set it: a metric, and an info line when it changes.
#
# With the assistant on (any mode) nothing needs a person: in an opted-in namespace admission puts
# our term in place of Tekton's and holds the placeholder until the leader gives it the balloon's
# node (operator/marking.py); every other namespace's runs are Tekton's alone. So no Event: a
# Warning would ask for an action there is none to take, and a Normal one would be a write in
# Tekton's namespace for a setting its administrator just made. `check` says what the mode means
# on demand; the log line and the gauge say when it changed.


class Assistant:
    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics

    def on_facts(self, old: Facts, new: Facts) -> None:
        """ClusterView listener. The mode is told once the watches have listed (before, the
        view's flags are a guess), and again on each change; a restart tells it once more."""
        self.metrics.tekton_assistant_on.set(1 if new.assistant_on else 0)
        if not new.synced:
            return
        said = assistant.meaning(new.feature_flags)
        if old.synced and assistant.meaning(old.feature_flags).state == said.state:
            return  # another flag changed, or another fact of the view
        label = assistant.mode_label(said.mode)
        for each in assistant.MODE_LABELS:
            self.metrics.tekton_assistant_mode.labels(each).set(1 if each == label else 0)
        previous = assistant.mode_label(assistant.mode(old.feature_flags)) if old.synced else None
        log.info("Tekton's affinity assistant mode", mode=label, previous=previous,
                 feature_flags=f"{self.settings.tekton_namespace}/{tekton.FEATURE_FLAGS_CONFIGMAP}",
                 state=said.state, opted_in=said.opted_in, others=said.others)
