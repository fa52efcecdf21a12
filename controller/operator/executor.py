"""The one executor: every write the operator makes to the API server, and every Event it says,
goes through `Executor.do` as an action (core/basics/actions.py), and comes back as data: what
the call returned, or the error and how kube/errors.py judges it. No other module of the
operator holds a write method of the API client (tests/operator/test_executor.py keeps it so).

Why one place: the Lease's fencing (kube/fencing.py, checked by the connection before a write
leaves) and the judgement of a failure then apply to every write alike, and what the operator
does to the cluster can be read, counted and recorded in one place. NotLeading is not data: it
ends this replica's turn as leader, so it goes on up as it came.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.core.basics import actions
from controller.core.basics.actions import Action
from controller.kube import errors
from controller.kube.admission_policies import AdmissionPolicies
from controller.kube.client import ApiError, Kube
from controller.kube.fencing import NotLeading
from controller.operator.notify import Notifier


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
