"""Scheduling constraints that the pods of a run will carry, and how the balloon inherits them.

Pure. Tekton merges its cluster default pod template with a run's podTemplate field by field,
the run's value winning where set; we do the same so that a node that suits the balloon suits
the run's pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The pod-template fields that decide where a pod may run, or that the balloon borrows.
_FIELDS = ("nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets")


@dataclass(frozen=True)
class Constraints:
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    node_affinity: Mapping[str, Any]
    priority_class_name: str | None
    image_pull_secrets: tuple[Mapping[str, Any], ...]


def _field(template: Mapping[str, Any], name: str) -> Any:
    value = template.get(name)
    return value if value not in (None, {}, [], "") else None


def effective_template(
    default: Mapping[str, Any] | None, run: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Tekton's merge: each field from the run's template if set, else from the default."""
    out: dict[str, Any] = {}
    for name in _FIELDS:
        value = _field(run or {}, name)
        if value is None:
            value = _field(default or {}, name)
        if value is not None:
            out[name] = value
    return out


def constraints_of(template: Mapping[str, Any]) -> Constraints:
    selector = template.get("nodeSelector")
    tolerations = template.get("tolerations")
    affinity = template.get("affinity")
    secrets = template.get("imagePullSecrets")
    pcn = template.get("priorityClassName")
    return Constraints(
        node_selector=(
            {k: v for k, v in selector.items() if isinstance(v, str)}
            if isinstance(selector, dict)
            else {}
        ),
        tolerations=tuple(t for t in tolerations or () if isinstance(t, dict))
        if isinstance(tolerations, list)
        else (),
        node_affinity=(affinity.get("nodeAffinity") or {} if isinstance(affinity, dict) else {}),
        priority_class_name=pcn if isinstance(pcn, str) and pcn else None,
        image_pull_secrets=tuple(s for s in secrets if isinstance(s, dict))
        if isinstance(secrets, list)
        else (),
    )


def merge_selectors(*selectors: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Union of node selectors; keys asked with two values are returned as conflicts."""
    merged: dict[str, str] = {}
    conflicts = []
    for selector in selectors:
        for key, value in selector.items():
            if key in merged and merged[key] != value:
                conflicts.append(f"{key} is both {merged[key]!r} and {value!r}")
            else:
                merged[key] = value
    return merged, conflicts


def union(items: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    out: list[Mapping[str, Any]] = []
    for item in items:
        if item not in out:
            out.append(item)
    return tuple(out)


def and_node_affinity(*parts: Mapping[str, Any]) -> dict[str, Any]:
    """A nodeAffinity that requires every part's required terms (terms are ORed inside one)."""
    required: list[dict[str, Any]] | None = None
    preferred: list[Any] = []
    for part in parts:
        terms = (part.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
            "nodeSelectorTerms"
        )
        if isinstance(terms, list) and terms:
            required = _and_terms(required, terms)
        pref = part.get("preferredDuringSchedulingIgnoredDuringExecution")
        if isinstance(pref, list):
            preferred.extend(p for p in pref if p not in preferred)
    out: dict[str, Any] = {}
    if required is not None:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return out


def _and_terms(left: list[dict[str, Any]] | None, right: Sequence[Any]) -> list[dict[str, Any]]:
    right_terms = [t for t in right if isinstance(t, dict)]
    if left is None:
        return [dict(t) for t in right_terms]
    out = []
    for a in left:
        for b in right_terms:
            term: dict[str, Any] = {}
            for key in ("matchExpressions", "matchFields"):
                exprs = list(a.get(key) or []) + [
                    e for e in b.get(key) or [] if e not in (a.get(key) or [])
                ]
                if exprs:
                    term[key] = exprs
            out.append(term)
    return out
