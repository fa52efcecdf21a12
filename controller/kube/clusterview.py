"""What every replica knows about the cluster: enabled namespaces, policies, Tekton's config.

Fed by Reflectors (kube.py) and read by the webhook and the operator alike. Each change
swaps in a new immutable Facts snapshot, so a reader never sees half an update.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog
import yaml

from controller.core.basics import names
from controller.core.model import assistant, tekton
from controller.core.policy import policy
from controller.kube.client import Kube
from controller.kube.reflector import Reflector, start_thread
from controller.kube.store import Listing
from controller.settings import Settings

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Facts:
    synced: bool = False
    enabled_namespaces: frozenset[str] = frozenset()
    assistant_on: bool = True
    policies: Mapping[str, policy.PolicyResolution] = field(default_factory=dict)
    policy_objects: tuple[Mapping[str, Any], ...] = ()
    # The status of each namespace's policy that applies: where its pipelines last ran
    # (core/placement/warmcache.py), written by the leader, read back by any replica after a
    # restart.
    warm_status: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    defaults: policy.PolicyResolution | None = None
    tekton_default_template: Mapping[str, Any] = field(default_factory=dict)
    # config-defaults default-container-resource-requirements: container name -> resources
    tekton_container_defaults: Mapping[str, Any] = field(default_factory=dict)
    tekton_managed_by: str = tekton.DEFAULT_MANAGED_BY
    feature_flags: Mapping[str, Any] | None = None
    tekton_version: str = ""  # pipelines-info data.version; "" while unknown

    @property
    def claims_per_run(self) -> bool:
        """Tekton's assistant makes the runs' templated claims, per run (core/model/assistant)."""
        return assistant.per_run(assistant.mode(self.feature_flags))

    def namespace_enabled(self, namespace: str) -> bool:
        return namespace in self.enabled_namespaces

    def policy_for(self, namespace: str) -> policy.PolicyResolution:
        found = self.policies.get(namespace)
        if found is not None:
            return found
        assert self.defaults is not None
        return self.defaults

    def topology_key(self, namespace: str) -> str:
        return self.policy_for(namespace).policy.topology_key


def switched_on(old: Facts, new: Facts) -> list[str]:
    """The namespaces a change of the view newly counts as enabled (none while it is not
    synced: the first sync is every namespace, and a leader's first resync round lists their
    runs anyway)."""
    if not (old.synced and new.synced):
        return []
    return sorted(new.enabled_namespaces - old.enabled_namespaces)


def default_pod_template(config_defaults: Mapping[str, Any] | None) -> dict[str, Any]:
    """Tekton's cluster default pod template (config-defaults: default-pod-template, YAML)."""
    return _yaml_entry(config_defaults, "default-pod-template")


def _yaml_entry(config_map: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
    text = ((config_map or {}).get("data") or {}).get(key)
    if not text:
        return {}
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        log.warning(f"tekton {key} is not YAML; ignored", error=str(exc))
        return {}
    return parsed if isinstance(parsed, dict) else {}


def by_namespace(store: Listing) -> dict[str, list[Mapping[str, Any]]]:
    found: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for obj in store.values():
        found[(obj.get("metadata") or {}).get("namespace", "")].append(obj)
    return found


def resolve_policies(settings: Settings, store: Listing) -> dict[str, policy.PolicyResolution]:
    base = settings.default_policy()
    return {ns: policy.resolve(base, objs) for ns, objs in by_namespace(store).items()}


def _spec_version(obj: Mapping[str, Any]) -> tuple[str, str]:
    """A policy's uid and generation: the API server bumps the generation on a change of its
    spec, never of its status (the CRD's status subresource); its namespace and name come with
    the uid."""
    meta = obj.get("metadata") or {}
    generation = str(meta.get("generation") or "")
    # Without one (an object not from an API server), the spec itself.
    return (str(meta.get("uid") or meta.get("name") or ""),
            generation or orjson.dumps(obj.get("spec"), option=orjson.OPT_SORT_KEYS).decode())


class ClusterView:
    def __init__(self, settings: Settings, kube: Kube) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self.facts = Facts(
            defaults=policy.PolicyResolution(settings.default_policy()),
        )
        self._parts: dict[str, bool] = {}
        self._specs: frozenset[tuple[str, str]] | None = None  # (uid, generation) resolved
        self._resolved: dict[str, policy.PolicyResolution] = {}
        self._listeners: list[Callable[[Facts, Facts], None]] = []
        selector = f"{settings.namespace_label}={settings.namespace_label_value}"
        self.reflectors = [
            Reflector(
                "namespaces",
                kube.core.list_namespace,
                (),
                self._on_namespaces,
                label_selector=selector,
                timeout=settings.api_timeout,
            ),
            Reflector(
                "tekton-config",
                kube.core.list_namespaced_config_map,
                (settings.tekton_namespace,),
                self._on_tekton_config,
                timeout=settings.api_timeout,
            ),
            Reflector(
                "policies",
                kube.custom.list_cluster_custom_object,
                (names.POLICY_GROUP, names.POLICY_VERSION, names.POLICY_PLURAL),
                self._on_policies,
                timeout=settings.api_timeout,
            ),
        ]

    def subscribe(self, listener: Callable[[Facts, Facts], None]) -> None:
        """listener(old, new) runs on every change, in the watching thread."""
        self._listeners.append(listener)

    def start(self) -> None:
        for reflector in self.reflectors:
            start_thread(reflector.run, f"watch-{reflector.name}")

    def stop(self) -> None:
        for reflector in self.reflectors:
            reflector.stop()

    def _update(self, part: str, **changes: Any) -> None:
        with self._lock:
            old = self.facts
            self._parts[part] = True
            synced = len(self._parts) == len(self.reflectors)
            self.facts = new = Facts(**{**old.__dict__, **changes, "synced": synced})
        for listener in self._listeners:
            try:
                listener(old, new)
            except Exception:
                log.exception("cluster view listener failed")

    def _on_namespaces(self, store: Listing) -> None:
        enabled = frozenset((o.get("metadata") or {}).get("name", "") for o in store.values())
        self._update("namespaces", enabled_namespaces=enabled)

    def _on_tekton_config(self, store: Listing) -> None:
        ns = self.settings.tekton_namespace
        flags = store.get(f"{ns}/{tekton.FEATURE_FLAGS_CONFIGMAP}")
        defaults = store.get(f"{ns}/{tekton.DEFAULTS_CONFIGMAP}")
        info = (store.get(f"{ns}/{tekton.PIPELINES_INFO_CONFIGMAP}") or {}).get("data") or {}
        data = (flags or {}).get("data") if flags else None
        self._update(
            "tekton-config",
            feature_flags=data,
            assistant_on=assistant.assistant_enabled(data),
            tekton_default_template=default_pod_template(defaults),
            tekton_container_defaults=_yaml_entry(
                defaults, "default-container-resource-requirements"
            ),
            tekton_managed_by=tekton.managed_by_value((defaults or {}).get("data")),
            tekton_version=str(info.get("version") or ""),
        )

    def _on_policies(self, store: Listing) -> None:
        applying = {ns: policy.oldest(objs) for ns, objs in by_namespace(store).items()}
        # A policy's status (where its pipelines last ran: written on every anchored run that
        # asked) changes no spec: the policies are resolved again only when a spec did.
        specs = frozenset(_spec_version(o) for o in store.values())
        if specs != self._specs:
            self._specs, self._resolved = specs, resolve_policies(self.settings, store)
        self._update(
            "policies",
            policies=self._resolved,
            policy_objects=tuple(store.values()),
            warm_status={ns: dict((obj or {}).get("status") or {})
                         for ns, obj in applying.items()},
        )
