"""The status of CoschedulingPolicies: written from core.policy.policystatus, with an Event for each
problem; and the count of invalid ones (a metric)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from controller.core.basics import names
from controller.core.basics.actions import Say, WritePolicyStatus
from controller.core.basics.notices import Notice
from controller.core.policy import policystatus
from controller.kube.client import Kube
from controller.kube.clusterview import ClusterView, Facts
from controller.metrics import Metrics
from controller.operator.executor import Executor
from controller.settings import Settings


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
    problems = policystatus.problems_of(base, obj, neighbours)
    status = policystatus.wanted_status(obj, problems, now)
    if status is None:
        return
    executor.do(WritePolicyStatus(meta.get("namespace", ""), meta.get("name", ""), status)).get()
    if problems:
        involved = {
            "apiVersion": f"{names.POLICY_GROUP}/{names.POLICY_VERSION}",
            "kind": names.POLICY_KIND,
            "metadata": meta,
        }
        notice = Notice(f"Policy{problems[0].reason}", problems[0].message)
        executor.do(Say(involved, notice, (meta.get("uid"), meta.get("generation"))))
