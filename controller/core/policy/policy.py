"""A namespace's effective policy: the defaults (from the settings), overridden by its
CoschedulingPolicy.

Pure. A policy that cannot be used is reported as a problem and the defaults apply.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.core.basics.fragments import (
    LabelMap,
    LocalObjectReference,
    ObjectName,
    QualifiedName,
    Resources,
    Toleration,
)


class Isolation(enum.StrEnum):
    """How balloons of different runs treat each other's topology domain."""

    NONE = "none"
    PREFERRED = "preferred"
    REQUIRED = "required"


class BalloonSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    resources: Resources | None = None
    node_selector: LabelMap | None = Field(default=None, alias="nodeSelector")
    tolerations: list[Toleration] | None = None
    affinity: dict[str, Any] | None = None
    priority_class_name: ObjectName | None = Field(default=None, alias="priorityClassName")
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None, alias="imagePullSecrets"
    )


class CapacitySpec(BaseModel):
    """Capacity-aware anchoring (core/capacity/reservation.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    # Anchor each run where its peak fits, and keep that room for it with a reservation pod.
    anchor: bool | None = None
    # What a task whose spec cannot be read (a resolver, a Task we may not read) is counted as.
    unknown_task: Resources | None = Field(default=None, alias="unknownTask")
    # How long the run waits for a node with room for its peak (an autoscaler's time to add
    # one) before it is anchored where the most of it fits.
    wait_seconds: int | None = Field(default=None, alias="waitSeconds", ge=0, le=3600)


@dataclass(frozen=True)
class Capacity:
    anchor: bool = True
    unknown_task: Mapping[str, str] = field(default_factory=dict)
    wait_seconds: int = 60


class WarmSpec(BaseModel):
    """Where a run starts fastest (core/placement/warm.py, core/placement/warmcache.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    # Prefer the nodes that already hold the most bytes of the run's images (on by default).
    images: bool | None = None
    # Prefer the node where the run's pipeline last ran in the namespace (its caches are warm).
    pipeline_cache: bool | None = Field(default=None, alias="pipelineCache")
    # A label of the run that names its pipeline for pipelineCache (core/placement/warmcache.py).
    pipeline_key: QualifiedName | None = Field(default=None, alias="pipelineKey")


@dataclass(frozen=True)
class Warm:
    images: bool = True
    pipeline_cache: bool = False
    pipeline_key: str = ""


class PolicySpec(BaseModel):
    """spec of a CoschedulingPolicy (crds/coschedulingpolicies.yaml is its schema)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    topology_key: QualifiedName | None = Field(default=None, alias="topologyKey")
    isolation: Isolation | None = None
    balloon: BalloonSpec = BalloonSpec()
    capacity: CapacitySpec = CapacitySpec()
    warm: WarmSpec = WarmSpec()


@dataclass(frozen=True)
class EffectivePolicy:
    topology_key: str
    isolation: Isolation
    image: str
    resources: Resources
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] = field(default_factory=dict)
    priority_class_name: str | None = None
    image_pull_secrets: tuple[Mapping[str, Any], ...] = ()
    capacity: Capacity = Capacity()
    warm: Warm = Warm()
    source: str = "defaults"


@dataclass(frozen=True)
class PolicyProblem:
    name: str
    reason: str
    message: str


@dataclass(frozen=True)
class PolicyResolution:
    policy: EffectivePolicy
    problems: tuple[PolicyProblem, ...] = ()


def parse_spec(spec: Any) -> PolicySpec:
    """Raises ValueError with a readable message for a spec we cannot use."""
    if not isinstance(spec, dict):
        raise ValueError("spec must be an object")
    try:
        parsed = PolicySpec.model_validate(spec)
    except ValidationError as exc:
        raise ValueError(
            "; ".join(
                f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
        ) from None
    affinity = parsed.balloon.affinity or {}
    unknown = set(affinity) - {"nodeAffinity", "podAffinity", "podAntiAffinity"}
    if unknown:
        raise ValueError(f"spec.balloon.affinity: unknown fields {sorted(unknown)}")
    return parsed


def apply(base: EffectivePolicy, spec: PolicySpec, source: str) -> EffectivePolicy:
    b = spec.balloon
    return EffectivePolicy(
        topology_key=spec.topology_key or base.topology_key,
        isolation=spec.isolation or base.isolation,
        image=base.image,
        resources=b.resources or base.resources,
        node_selector=dict(b.node_selector) if b.node_selector is not None else base.node_selector,
        tolerations=(
            tuple(t.to_k8s() for t in b.tolerations)
            if b.tolerations is not None
            else base.tolerations
        ),
        affinity=dict(b.affinity) if b.affinity is not None else base.affinity,
        priority_class_name=b.priority_class_name or base.priority_class_name,
        image_pull_secrets=(
            tuple(s.to_k8s() for s in b.image_pull_secrets)
            if b.image_pull_secrets is not None
            else base.image_pull_secrets
        ),
        capacity=_capacity(base.capacity, spec.capacity),
        warm=Warm(
            images=base.warm.images if spec.warm.images is None else spec.warm.images,
            pipeline_cache=(base.warm.pipeline_cache if spec.warm.pipeline_cache is None
                            else spec.warm.pipeline_cache),
            pipeline_key=spec.warm.pipeline_key or base.warm.pipeline_key,
        ),
        source=source,
    )


def _capacity(base: Capacity, spec: CapacitySpec) -> Capacity:
    return Capacity(
        anchor=base.anchor if spec.anchor is None else spec.anchor,
        unknown_task=(
            base.unknown_task
            if spec.unknown_task is None
            else {"cpu": spec.unknown_task.cpu, "memory": spec.unknown_task.memory}
        ),
        wait_seconds=base.wait_seconds if spec.wait_seconds is None else spec.wait_seconds,
    )


def _age_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


def oldest(policies: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The policy object that applies to its namespace (see resolve)."""
    return min(policies, key=_age_key, default=None)


def resolve(base: EffectivePolicy, policies: Sequence[Mapping[str, Any]]) -> PolicyResolution:
    """The namespace's effective policy from its CoschedulingPolicy objects.

    One policy per namespace is meant; if there are several, the oldest wins and the others
    are reported as superseded, so that adding a second one never changes running behaviour.
    """
    ordered = sorted(policies, key=_age_key)
    if not ordered:
        return PolicyResolution(base)
    problems = [
        PolicyProblem(
            _age_key(p)[1], "Superseded", f"policy {_age_key(ordered[0])[1]!r} is older and applies"
        )
        for p in ordered[1:]
    ]
    first = ordered[0]
    name = _age_key(first)[1]
    try:
        spec = parse_spec(first.get("spec", {}))
    except ValueError as exc:
        problems.insert(0, PolicyProblem(name, "Invalid", f"{exc}; the defaults apply"))
        return PolicyResolution(base, tuple(problems))
    return PolicyResolution(apply(base, spec, f"CoschedulingPolicy/{name}"), tuple(problems))
