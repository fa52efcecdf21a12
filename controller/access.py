"""The API access the operator needs, in one place: `check` verifies it, the chart grants it."""

from __future__ import annotations

from dataclasses import dataclass

from controller import names, tekton


@dataclass(frozen=True)
class Access:
    group: str
    resource: str
    verbs: tuple[str, ...]
    why: str
    # Namespaced to Tekton's namespace rather than cluster-wide.
    tekton_namespace_only: bool = False


REQUIRED: tuple[Access, ...] = (
    Access(tekton.GROUP, "pipelineruns", ("get", "list", "watch"), "watch runs; never written"),
    Access(
        "apps",
        "statefulsets",
        ("get", "list", "watch", "create", "patch", "delete"),
        "the balloons",
    ),
    Access(
        "",
        "pods",
        ("get", "list", "watch", "delete"),
        "balloon placement, misplaced pods; delete only an unbound balloon pod",
    ),
    Access("", "persistentvolumeclaims", ("list",), "find the claims a run owns"),
    Access("", "namespaces", ("list", "watch"), "which namespaces opted in"),
    Access("", "events", ("create",), "tell run owners what happened"),
    Access(
        "",
        "configmaps",
        ("list", "watch"),
        "Tekton's feature-flags and config-defaults",
        tekton_namespace_only=True,
    ),
    Access(
        names.POLICY_GROUP, names.POLICY_PLURAL, ("get", "list", "watch"), "per-namespace policy"
    ),
    Access(names.POLICY_GROUP, f"{names.POLICY_PLURAL}/status", ("patch",), "report policy status"),
)
