"""Pure: Kubernetes resource quantities as exact integers, and resource lists as sums.

Amounts are held in thousandths of the unit (millicores, millibytes), rounded up, as the API
server's `MilliValue()` does, so that CPU and memory, and extended resources, add and compare
exactly. A quantity that does not parse is an error for the caller to report, never a zero.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

_FORM = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][-+]?[0-9]+|[numkMGTPE]i?|Ki)?$")
_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9),
    "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30),
    "Ti": Fraction(2**40), "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
# The resources Tekton spreads over steps and that LimitRanges default (pkg/internal/
# computeresources: cpu, memory, ephemeral-storage); others only add up.
CPU, MEMORY, EPHEMERAL = "cpu", "memory", "ephemeral-storage"
PODS = "pods"

Amounts = dict[str, int]  # resource name -> thousandths of its unit


def parse(value: Any) -> int:
    """Thousandths of the unit, rounded up. Raises ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a quantity")
        return math.ceil(Fraction(value) * 1000)
    match = _FORM.match(str(value).strip()) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (for example 10m, 0.5, 16Mi)")
    number, suffix = match.group(1), match.group(2) or ""
    exponent = len(suffix) > 1 and suffix[0] in "eE"
    unit = Fraction(10) ** int(suffix[1:]) if exponent else _SUFFIX[suffix]
    return math.ceil(Fraction(number) * unit * 1000)


def amounts(resources: Mapping[str, Any] | None) -> Amounts:
    """A resource list (requests or limits) as amounts; zero entries are kept as zero."""
    return {str(name): parse(q) for name, q in (resources or {}).items()}


def add(*lists: Mapping[str, int]) -> Amounts:
    total: Amounts = {}
    for one in lists:
        for name, amount in one.items():
            total[name] = total.get(name, 0) + amount
    return total


def scale(amounts_: Mapping[str, int], factor: int) -> Amounts:
    return {name: amount * factor for name, amount in amounts_.items()}


def maximum(lists: Iterable[Mapping[str, int]]) -> Amounts:
    """Per resource, the largest amount any of the lists has."""
    top: Amounts = {}
    for one in lists:
        for name, amount in one.items():
            top[name] = max(top.get(name, 0), amount)
    return top


def minus(a: Mapping[str, int], b: Mapping[str, int]) -> Amounts:
    """What of `a` is left after `b`, never below zero; resources at zero are left out."""
    left = {name: amount - b.get(name, 0) for name, amount in a.items()}
    return {name: amount for name, amount in left.items() if amount > 0}


def fits(need: Mapping[str, int], room: Mapping[str, int]) -> bool:
    return all(amount <= room.get(name, 0) for name, amount in need.items() if amount > 0)


def render(amount: int, resource: str) -> str:
    """An amount back as a quantity the API server accepts: millicores for CPU, whole units
    (rounded up) for the rest, in binary units when they divide evenly, as people write them."""
    if resource == CPU:
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    whole = -(-amount // 1000)
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = int(_SUFFIX[suffix])
        if whole >= unit and whole % unit == 0:
            return f"{whole // unit}{suffix}"
    return str(whole)


def to_k8s(amounts_: Mapping[str, int]) -> dict[str, str]:
    """A resource list for a pod spec; pods are not a container resource and are left out."""
    return {
        name: render(amount, name)
        for name, amount in sorted(amounts_.items())
        if amount > 0 and name != PODS
    }


def describe(amounts_: Mapping[str, int]) -> str:
    """For people: `cpu 3, memory 6Gi, pods 5`."""
    return ", ".join(
        f"{name} {render(amount, name) if name != PODS else amount // 1000}"
        for name, amount in sorted(amounts_.items(), key=lambda kv: (_ORDER.get(kv[0], 9), kv[0]))
        if amount > 0
    )


_ORDER = {CPU: 0, MEMORY: 1, EPHEMERAL: 2, PODS: 3}
