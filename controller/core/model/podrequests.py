"""Pure: the requests of the pod Tekton v1.15 builds for one TaskRun, as the scheduler counts them.

The rules are read from Tekton's `pkg/pod/pod.go` and `pkg/internal/` (v1.15.0) and from the API
server's defaulting and LimitRanger admission, in the order they act on a pod:

1. steps: `stepTemplate` merged under each step, then `stepSpecs` over it, key by key
   (`MergeStepsWithStepTemplate`, `MergeStepsWithSpecs`); sidecars with `sidecarSpecs`;
2. task-level `computeResources` (`tasklevel`): every step gets the task's requests divided by
   the number of steps (or, when neither sets requests, its limits divided) and its limits;
3. `default-container-resource-requirements` of config-defaults (`defaultresourcerequirements`):
   by container name, then `prefix-` entries, then `default`, onto containers without resources
   and onto Tekton's own containers;
4. the namespace's LimitRanges (`computeresources`): a step without requests gets the default
   request divided by the number of steps (at least the minimum);
5. the API server: a limit without a request makes the request; LimitRanger gives what is still
   missing the full default request, init containers included;
6. the pod asks the larger of its containers' sum and its largest init container, and one pod.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.core.basics import quantity
from controller.core.basics.quantity import CPU, EPHEMERAL, MEMORY, PODS, Amounts

_SPREAD = (CPU, MEMORY, EPHEMERAL)  # what Tekton divides among steps and LimitRanges default
_PREPARE, _SCRIPTS, _WORKDIR = "prepare", "place-scripts", "working-dir-initializer"
_INTERNAL = {_PREPARE, _SCRIPTS, _WORKDIR, "sidecar-tekton-log-results"}


@dataclass
class _Container:
    name: str
    requests: dict[str, Any] | None = None
    limits: dict[str, Any] | None = None

    @property
    def empty(self) -> bool:
        return not self.requests and not self.limits


@dataclass(frozen=True)
class Namespace:
    """What the namespace and Tekton's configuration add to every pod."""

    limit_ranges: tuple[Mapping[str, Any], ...] = ()
    # config-defaults `default-container-resource-requirements`, parsed: name -> requirements
    container_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _d(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _merge(under: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """A strategic merge of two ResourceRequirements: each list merges key by key."""
    merged: dict[str, Any] = {}
    for key in ("requests", "limits"):
        both = {**_d(under.get(key)), **_d(over.get(key))}
        if both:
            merged[key] = both
    return merged


def _by_name(specs: Any) -> dict[str, dict[str, Any]]:
    return {
        str(s.get("name")): _d(s.get("computeResources"))
        for s in specs or []
        if isinstance(s, Mapping) and s.get("name")
    }


def _divided(resources: Mapping[str, Any] | None, n: int) -> dict[str, Any] | None:
    """Tekton's average: memory and storage by whole units, everything else by thousandths."""
    if not resources or n == 0:
        return None
    out: dict[str, Any] = {}
    for name, q in resources.items():
        amount = quantity.parse(q)
        share = -(-amount // 1000) // n * 1000 if name in (MEMORY, EPHEMERAL) else amount // n
        out[name] = f"{share}m"
    return out


def _steps(task_spec: Mapping[str, Any], run_spec: Mapping[str, Any]) -> list[_Container]:
    template = _d(_d(task_spec.get("stepTemplate")).get("computeResources"))
    overrides = _by_name(run_spec.get("stepSpecs"))
    steps: list[_Container] = []
    raw = [s for s in task_spec.get("steps") or [] if isinstance(s, Mapping)]
    for i, step in enumerate(raw):
        own = _merge(template, _d(step.get("computeResources")))
        name = str(step.get("name") or "")
        if name in overrides:
            own = _merge(own, overrides[name])
        steps.append(_Container(f"step-{name or f'unnamed-{i}'}", own.get("requests"),
                                own.get("limits")))
    task_level = _d(run_spec.get("computeResources"))
    if task_level.get("requests") or task_level.get("limits"):
        average = _divided(task_level.get("requests"), len(steps))
        average_limits = _divided(task_level.get("limits"), len(steps))
        for c in steps:
            if not c.requests and not task_level.get("requests"):
                c.requests = average_limits
            else:
                c.requests = average
            c.limits = _d(task_level.get("limits")) or None
    return steps


def _sidecars(task_spec: Mapping[str, Any], run_spec: Mapping[str, Any]) -> list[_Container]:
    overrides = _by_name(run_spec.get("sidecarSpecs"))
    out = []
    raw = [s for s in task_spec.get("sidecars") or [] if isinstance(s, Mapping)]
    for i, sidecar in enumerate(raw):
        name = str(sidecar.get("name") or "")
        own = _merge({}, _d(sidecar.get("computeResources")))
        if name in overrides:
            own = _merge(own, overrides[name])
        out.append(_Container(f"sidecar-{name or f'unnamed-{i}'}", own.get("requests"),
                              own.get("limits")))
    return out


def _inits(task_spec: Mapping[str, Any]) -> list[_Container]:
    every = [s for key in ("steps", "sidecars") for s in task_spec.get(key) or []
             if isinstance(s, Mapping)]
    inits = [_Container(_PREPARE)]
    if any(s.get("script") for s in every):
        inits.append(_Container(_SCRIPTS))
    dirs = {posixpath.normpath(str(s["workingDir"])) for s in task_spec.get("steps") or []
            if isinstance(s, Mapping) and s.get("workingDir")}
    if any(not d.startswith("/") or d.startswith("/workspace/") for d in dirs):
        inits.append(_Container(_WORKDIR))
    return inits


def _give(c: _Container, requirements: Mapping[str, Any]) -> None:
    c.requests = _d(requirements.get("requests")) or None
    c.limits = _d(requirements.get("limits")) or None


def _config_defaults(containers: Sequence[_Container], defaults: Mapping[str, Any]) -> None:
    matched: set[int] = set()
    named = {k: v for k, v in defaults.items() if k != "default" and not k.startswith("prefix-")}
    for name, req in named.items():
        for c in containers:
            if c.name == name and req and (c.empty or c.name in _INTERNAL):
                _give(c, req)
                if c.name in _INTERNAL:
                    matched.add(id(c))
    for key, req in defaults.items():
        if not key.startswith("prefix-") or not req:
            continue
        prefix = key.removeprefix("prefix-") + "-"
        for c in containers:
            if c.name.startswith(prefix) and (
                c.empty or (c.name in _INTERNAL and id(c) not in matched)
            ):
                _give(c, req)
                if c.name in _INTERNAL:
                    matched.add(id(c))
    fallback = defaults.get("default")
    if fallback:
        for c in containers:
            if c.empty or (c.name in _INTERNAL and id(c) not in matched):
                _give(c, fallback)


def defaulted_items(limit_ranges: Sequence[Mapping[str, Any]]) -> list[dict[str, dict[str, int]]]:
    """The Container items of the namespace's LimitRanges, defaulted as the API server stores
    them (default <- max, defaultRequest <- default, then min), as amounts."""
    items = []
    for lr in limit_ranges:
        for item in _d(lr.get("spec")).get("limits") or []:
            if not isinstance(item, Mapping) or item.get("type") != "Container":
                continue
            mx, mn = quantity.amounts(item.get("max")), quantity.amounts(item.get("min"))
            default = {**mx, **quantity.amounts(item.get("default"))}
            request = {**mn, **default, **quantity.amounts(item.get("defaultRequest"))}
            items.append({"min": mn, "default": default, "defaultRequest": request})
    return items


def _virtual(items: Sequence[Mapping[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """Tekton's single LimitRange standing for several: the largest minimum, the smallest
    non-zero default request (`limitrange.GetVirtualLimitRange`)."""
    mn: dict[str, int] = {}
    request: dict[str, int] = {}
    for item in items:
        for name in _SPREAD:
            mn[name] = max(mn.get(name, 0), item["min"].get(name, 0))
            value = item["defaultRequest"].get(name, 0)
            if value and (not request.get(name) or value < request[name]):
                request[name] = value
    return {"min": mn, "defaultRequest": request}


def _limit_range_steps(
    steps: Sequence[_Container], items: Sequence[Mapping[str, dict[str, int]]], several: bool
) -> None:
    if not items or not steps:
        return
    per_step: dict[str, int] = {}
    for item in [_virtual(items)] if several else items:
        for name in _SPREAD:
            share = item["defaultRequest"].get(name, 0)
            # CPU by thousandths; memory and storage by whole units (Value() in Go)
            n = len(steps)
            share = share // n if name == CPU else -(-share // 1000) // n * 1000
            result = max(per_step.get(name, 0), share, item["min"].get(name, 0))
            if result:
                per_step[name] = result
    for step in steps:
        if not step.requests:
            step.requests = {k: f"{v}m" for k, v in per_step.items()} or None
            continue
        for name, amount in per_step.items():
            if not quantity.parse(step.requests.get(name, 0)):
                step.requests[name] = f"{amount}m"


def _final(c: _Container, items: Sequence[Mapping[str, dict[str, int]]]) -> Amounts:
    requests = quantity.amounts(c.requests)
    limits = quantity.amounts(c.limits)
    for name, amount in limits.items():  # API defaulting: a limit without a request
        requests.setdefault(name, amount)
    # LimitRanger gives what is still missing from each LimitRange in turn, in the order its
    # cache lists them, which is not fixed: count the largest.
    missing = quantity.maximum(
        {k: v for k, v in item["defaultRequest"].items() if k not in requests} for item in items
    )
    return {**requests, **missing}


def pod_requests(
    task_spec: Mapping[str, Any],
    run_spec: Mapping[str, Any] | None = None,
    namespace: Namespace | None = None,
) -> Amounts:
    """The pod's requests (with `pods`: 1000, one pod) for a TaskRun of `task_spec`, with the
    pipeline run's `taskRunSpecs` entry for it (`stepSpecs`, `sidecarSpecs`,
    `computeResources`). Raises ValueError for a quantity that does not parse."""
    run_spec = run_spec or {}
    steps = _steps(task_spec, run_spec)
    containers = [*steps, *_sidecars(task_spec, run_spec)]
    inits = _inits(task_spec)
    namespace = namespace or Namespace()
    _config_defaults([*inits, *containers], namespace.container_defaults)
    items = defaulted_items(namespace.limit_ranges)
    _limit_range_steps(steps, items, several=len(namespace.limit_ranges) > 1)
    total = quantity.add(*(_final(c, items) for c in containers))
    pod = quantity.maximum([total, *(_final(c, items) for c in inits)])
    pod[PODS] = 1000
    return {name: amount for name, amount in pod.items() if amount > 0}


def of_pod(pod: Mapping[str, Any]) -> Amounts:
    """The requests of a pod as it is, as the scheduler counts them: the larger of its
    containers' sum and its largest init container (sidecar init containers, which keep
    running, add to both), its RuntimeClass overhead, and one pod."""
    spec = _d(pod.get("spec"))

    def req(c: Any) -> Amounts:
        return quantity.amounts(_d(_d(c).get("resources")).get("requests"))

    inits = [c for c in spec.get("initContainers") or [] if isinstance(c, Mapping)]
    always = [c for c in inits if c.get("restartPolicy") == "Always"]
    running = quantity.add(*(req(c) for c in spec.get("containers") or []), *map(req, always))
    started: list[Amounts] = []
    before: Amounts = {}
    for c in inits:
        if c.get("restartPolicy") == "Always":
            before = quantity.add(before, req(c))
        else:
            started.append(quantity.add(before, req(c)))
    overhead = quantity.amounts(spec.get("overhead"))
    pod_ = quantity.add(quantity.maximum([running, *started]), overhead)
    pod_[PODS] = 1000
    return {name: amount for name, amount in pod_.items() if amount > 0}
