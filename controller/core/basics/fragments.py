"""Validated Kubernetes fragments that users hand us: in settings and in CoschedulingPolicy.

They are checked once, where they enter, so that everything downstream can trust them and
emit them back as plain Kubernetes dicts.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
_QUANTITY = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|[numkMGTPE]i?|Ki)?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_NAME.match(value))


def is_qualified_name(key: str) -> bool:
    """A label key or topologyKey: optional DNS-subdomain prefix, '/', name of 1-63 chars."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


def is_dns_subdomain(name: str) -> bool:
    return 0 < len(name) <= 253 and bool(_DNS_SUBDOMAIN.match(name))


def _quantity(value: str) -> str:
    if not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (for example 10m, 0.5, 16Mi)")
    return value


def _qualified_name(value: str) -> str:
    if not is_qualified_name(value):
        raise ValueError(f"{value!r} is not a valid label key (prefix/name, name of 1-63 chars)")
    return value


def _label_map(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        _qualified_name(key)
        if not is_label_value(val):
            raise ValueError(f"{val!r} (for {key!r}) is not a valid label value")
    return value


def _dns_name(value: str) -> str:
    if not is_dns_subdomain(value):
        raise ValueError(f"{value!r} is not a valid object name (DNS subdomain)")
    return value


Quantity = Annotated[str, AfterValidator(_quantity)]
QualifiedName = Annotated[str, AfterValidator(_qualified_name)]
LabelMap = Annotated[dict[str, str], AfterValidator(_label_map)]
ObjectName = Annotated[str, AfterValidator(_dns_name)]


class _Fragment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def to_k8s(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Toleration(_Fragment):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds")


class Resources(_Fragment):
    """The balloon's resources. Requests always equal limits (Guaranteed QoS, quota-friendly)."""

    cpu: Quantity = "10m"
    memory: Quantity = "16Mi"

    def to_k8s(self) -> dict[str, Any]:
        amounts = {"cpu": self.cpu, "memory": self.memory}
        return {"requests": dict(amounts), "limits": dict(amounts)}


class LocalObjectReference(_Fragment):
    name: ObjectName
