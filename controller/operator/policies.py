"""The status of CoschedulingPolicies: written from core.policy.policystatus, with an Event for each
problem; and the count of invalid ones (a metric). In policy mode, the bindings that make the
chart's MutatingAdmissionPolicy act (below)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from controller.core.admission import admission_policy
from controller.core.basics.actions import (
    DeleteBinding,
    MakeBinding,
    ReplaceBinding,
    WritePolicyStatus,
)
from controller.core.policy import policystatus
from controller.kube.admission_policies import AdmissionPolicies
from controller.kube.client import ApiError, Kube, api_message
from controller.kube.clusterview import ClusterView, Facts
from controller.metrics import Metrics
from controller.operator.executor import Executor
from controller.settings import Settings


def status_key(namespace: str, name: str) -> str:
    """The work queue's key of a policy's status: its event's and the resync's work on it."""
    return f"policy/{namespace}/{name}"


class Policies:
    def __init__(self, settings: Settings, kube: Kube, executor: Executor, metrics: Metrics,
                 view: ClusterView) -> None:
        self.settings = settings
        self.kube = kube
        self.executor = executor
        self.metrics = metrics
        self.view = view
        view.subscribe(self.on_facts)

    def report(self, obj: Mapping[str, Any], cached: bool = False) -> None:
        """cached: from the resync, which writes only what the watch's copy says is not so.
        Nothing is written before the operator's own view holds this generation of the policy:
        Ready says the policy is in effect for the runs decided next, not only that it parses
        (kopf's event of it may come before the view's; the resync reports it once the view
        has it)."""
        if not self._in_effect(obj):
            return
        neighbours = None
        if cached:
            ns = (obj.get("metadata") or {}).get("namespace")
            neighbours = [
                o for o in self.view.facts.policy_objects
                if (o.get("metadata") or {}).get("namespace") == ns
            ]
        report(self.settings, self.kube, self.executor, obj, neighbours)

    def look(self, namespace: str, name: str) -> None:
        """The policy's status kept, from the view's copy as it is when this work runs: the
        newest this replica holds (kopf's event of it may come first, and a resync round read
        it earlier). Work under the policy's key (faces/kopf_handlers.py, faces/resync.py)."""
        for obj in self.view.facts.policy_objects:
            meta = obj.get("metadata") or {}
            if (meta.get("namespace"), meta.get("name")) == (namespace, name):
                self.report(obj, cached=True)

    def _in_effect(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        for seen in self.view.facts.policy_objects:
            held = seen.get("metadata") or {}
            if held.get("uid") == meta.get("uid"):
                return int(held.get("generation") or 0) >= int(meta.get("generation") or 0)
        return False

    def on_facts(self, old: Facts, new: Facts) -> None:
        invalid = sum(1 for r in new.policies.values() for p in r.problems if p.reason == "Invalid")
        self.metrics.policy_problems.set(invalid)


def report(
    settings: Settings,
    kube: Kube,
    executor: Executor,
    obj: Mapping[str, Any],
    cached: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Writes the policy's status where it is not what it should be. `cached`: the namespace's
    policies as a watch saw them; if they say the status is right, nothing is asked."""
    meta = obj.get("metadata") or {}
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    base = settings.default_policy()
    if cached is not None and policystatus.wanted_status(
        obj, policystatus.problems_of(base, obj, cached), now
    ) is None:
        return
    # A fresh list rather than our watch's copy, which may not have seen a policy just made.
    neighbours = kube.list_policies(meta.get("namespace", ""))
    for action in policystatus.plan(base, obj, neighbours, now):
        done = executor.do(action)
        if isinstance(action, WritePolicyStatus):
            done.get()  # tried again after a backoff (faces/serial.py); said after it is written


# -- policy mode: the bindings ---------------------------------------------------------------------
# Policy mode: keeps our MutatingAdmissionPolicyBindings what core.admission.admission_policy says.
#
# Called by the leader only: on every change of the cluster view it reads (a namespace's policy,
# one switched on or off) and on every resync, so that a binding deleted or edited by someone
# else is put back within one resync. Each only puts the key
# KEY on the leader's work queue (Operator.soon), which runs one worker per key: the bindings are
# kept by one worker at a time, from the view as it is when that worker runs, and a failure is
# tried again after the queue's backoff. Without a queue (unit tests) they are kept in place.

log = structlog.get_logger(__name__)

KEY = "bindings"  # the work queue's key (no run's uid, namespace or policy key looks so)
# soon(key, slot, act, seconds): work under a key of the leader's work queue (Operator.soon).
Soon = Callable[[str, Hashable, Callable[[], None], float], None]


class PolicyBindings:
    def __init__(
        self,
        settings: Settings,
        api: AdmissionPolicies,
        metrics: Metrics,
        own_namespace: str,
        *,
        executor: Executor,
        held: Callable[[], frozenset[str] | None] = lambda: frozenset(),
        soon: Soon | None = None,
        facts: Callable[[], Facts] | None = None,
    ) -> None:
        self.settings = settings
        # Reads from `api`; writes through the operator's executor (its Events said once).
        self.executor = executor
        # The namespaces of live runs the operator anchored (None while not known yet).
        self.held = held
        self.api = api
        self.metrics = metrics
        self.own_namespace = own_namespace
        self.active = False  # set once this replica leads and its work queue is made
        # The work queue, and the view its worker reads (both or neither: in place without).
        self.soon = soon
        self.facts = facts
        # Said once until mended; read and written by the one worker of KEY (or in place).
        self._missing_said = False
        self._custom_missing_said = False

    def on_facts(self, old: Facts, new: Facts) -> None:
        """A change of the cluster view that the bindings read. A policy's status alone (ours:
        where its pipelines last ran, written on every anchored run that asked) changes none:
        three calls to the API server a run were spent on it."""
        if old.synced and _read(old) == _read(new):
            return
        self.sync(new)

    def sync(self, facts: Facts) -> None:
        """The bindings kept as `facts` say: on the queue, under KEY, where the worker reads
        the view as it is then (a key already waiting is not put twice); in place without one,
        a refusal said and counted here, and tried again by the next change or resync."""
        if not (self.active and facts.synced):
            return
        if self.soon is None or self.facts is None:
            try:
                self._keep(facts)
            except ApiError as exc:
                log.warning("admission policy bindings not updated", error=api_message(exc),
                            status=exc.status)
            return
        view = self.facts
        self.soon(KEY, KEY, lambda: self._keep(view()), 0.0)

    def _keep(self, facts: Facts) -> None:
        """A refusal is counted and raised: on the queue, its error policy says it and tries
        the key again after its backoff (kube/errors.py)."""
        try:
            self._sync(facts)
        except ApiError:
            self.metrics.binding_problems.inc()
            raise

    def _sync(self, facts: Facts) -> None:
        s = self.settings
        policy = self.api.get_policy(s.admission_policy_name)
        if policy is None:
            if not self._missing_said:
                log.error(
                    "policy mode, but the MutatingAdmissionPolicy is not installed: no pod "
                    "gets its affinity term until the chart installs it",
                    policy=s.admission_policy_name,
                )
                self._missing_said = True
            return
        self._missing_said = False
        custom = self.api.get_policy(s.admission_policy_name + admission_policy.CUSTOM_SUFFIX)
        if custom is None and not self._custom_missing_said:
            log.error(
                "the chart's second MutatingAdmissionPolicy is not installed: namespaces whose "
                "CoschedulingPolicy sets another topologyKey get the default one",
                policy=s.admission_policy_name + admission_policy.CUSTOM_SUFFIX,
            )
        self._custom_missing_said = custom is None
        mode = admission_policy.PolicyMode(
            policy_name=s.admission_policy_name,
            policy_uid=str((policy.get("metadata") or {}).get("uid") or ""),
            namespace_label=s.namespace_label,
            namespace_label_value=s.namespace_label_value,
            excluded_namespaces=(self.own_namespace, "kube-system"),
            default_topology_key=s.topology_key,
            api_version=f"{policy.get('apiVersion')}",
            custom_policy_uid=str(((custom or {}).get("metadata") or {}).get("uid") or ""),
        )
        overridden = admission_policy.overrides(facts.policies, s.topology_key)
        existing = self.api.list_bindings(admission_policy.BINDING_SELECTOR)
        known = self.held()
        held = set(facts.enabled_namespaces) | set(
            known if known is not None else admission_policy.held_by(existing, mode))
        wanted = admission_policy.desired(mode, overridden, held=held)
        plan = admission_policy.changes(wanted, existing)
        for body in plan.create:
            self.executor.do(MakeBinding(body)).get()
            log.info("admission policy binding created", binding=body["metadata"]["name"])
        for body, version in plan.replace:
            self.executor.do(ReplaceBinding(body, version)).get()
            log.info("admission policy binding updated", binding=body["metadata"]["name"])
        for name in plan.delete:
            self.executor.do(DeleteBinding(name)).get()
            log.info("admission policy binding deleted", binding=name)
        self.metrics.policy_bindings.set(len(wanted))


def _read(facts: Facts) -> tuple[object, ...]:
    """What of the cluster view the bindings depend on."""
    return (facts.synced, facts.enabled_namespaces, facts.policies)
