"""The status of CoschedulingPolicies: written from core.policystatus, with an Event for each
problem."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller.core import names, policystatus
from controller.core.notices import Notice
from controller.kube.client import Kube
from controller.operator.notify import Notifier
from controller.settings import Settings


def report(settings: Settings, kube: Kube, notifier: Notifier, obj: Mapping[str, Any]) -> None:
    meta = obj.get("metadata") or {}
    # A fresh list rather than our watch's copy, which may not have seen a policy just made.
    neighbours = kube.list_policies(meta.get("namespace", ""))
    problems = policystatus.problems_of(settings.default_policy(), obj, neighbours)
    status = policystatus.wanted_status(
        obj, problems, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    if status is None:
        return
    kube.patch_policy_status(meta.get("namespace", ""), meta.get("name", ""), status)
    if problems:
        involved = {
            "apiVersion": f"{names.POLICY_GROUP}/{names.POLICY_VERSION}",
            "kind": names.POLICY_KIND,
            "metadata": meta,
        }
        notice = Notice(f"Policy{problems[0].reason}", problems[0].message)
        notifier.tell(involved, notice, (meta.get("uid"), meta.get("generation")))
