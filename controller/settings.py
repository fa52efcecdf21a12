"""Operator settings: read once from COSCHEDULER_* environment variables, frozen, validated.

Beneath every layer but the core: the kube, operator and face layers are handed a Settings;
the core never sees one (it is given the values it needs, such as the default policy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from controller.core.basics import names
from controller.core.basics.fragments import (
    LabelMap,
    LocalObjectReference,
    ObjectName,
    QualifiedName,
    Resources,
    Toleration,
)
from controller.core.policy.policy import Capacity, EffectivePolicy, Isolation, Warm

ENV_PREFIX = "COSCHEDULER_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="forbid", case_sensitive=False
    )

    namespace_label: QualifiedName = names.NAMESPACE_LABEL
    namespace_label_value: str = "true"

    balloon_image: str = Field(default="registry.k8s.io/pause:3.10", min_length=1)
    balloon_resources: Resources = Resources()
    balloon_priority_class_name: ObjectName | None = None
    balloon_node_selector: LabelMap = {}
    balloon_tolerations: list[Toleration] = []
    balloon_image_pull_secrets: list[LocalObjectReference] = []

    # Capacity-aware anchoring (core/capacity/reservation.py): on by default, a policy may turn it
    # off.
    capacity_anchor: bool = True
    capacity_wait_seconds: int = Field(default=60, ge=0, le=3600)
    # Cluster Autoscaler runs in the cluster: a run larger than every node waits for it to add
    # a bigger one (its node groups are not visible; Karpenter's NodePools are read instead).
    cluster_autoscaler: bool = False
    # The chart's PriorityClass for reservation pods: below every task pod, above autoscalers'
    # expendable cutoff, never preempting.
    reservation_priority_class_name: ObjectName = "tekton-coscheduler-reservation"
    # Warm anchors (core/placement/warm.py): a run's anchor prefers the nodes that hold its images;
    # on by default, since it only prefers. A policy may turn it off, or ask for warm caches.
    warm_images: bool = True

    topology_key: QualifiedName = "kubernetes.io/hostname"
    isolation: Isolation = Isolation.NONE

    # webhook: our admission webhook adds the affinity term; policy: the chart's
    # MutatingAdmissionPolicy does, and the operator keeps its bindings.
    admission_mode: Literal["webhook", "policy"] = "webhook"
    admission_policy_name: ObjectName = "tekton-coscheduler"
    # Webhook mode: a run's pods made before its balloon pod is bound wait behind a scheduling
    # gate until it is (core/placement/gate.py), rather than race it for their shared volumes.
    gate_until_anchored: bool = True
    admission_policy_version: Literal["v1", "v1beta1"] = "v1"

    webhook_host: str = "0.0.0.0"
    # 0: no webhook server (policy mode).
    webhook_port: int = Field(default=9443, ge=0, le=65535)
    webhook_cert_file: Path | None = None
    webhook_key_file: Path | None = None
    webhook_cert_check_interval: float = Field(default=10.0, gt=0)
    # The server keeps its own certificate (the chart's `controller` TLS mode,
    # kube/webhook_tls.py): a CA and a certificate in this Secret of the pod's namespace, made
    # at start when absent and written to the cert and key files; its CA set as the caBundle of
    # this MutatingWebhookConfiguration. Empty: the files are given (a secret volume).
    webhook_tls_secret: ObjectName | Literal[""] = ""
    webhook_configuration: ObjectName | Literal[""] = ""
    metrics_host: str = "0.0.0.0"
    metrics_port: int = Field(default=9090, ge=0, le=65535)
    health_port: int = Field(default=8080, ge=0, le=65535)

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "console"] = "json"

    tekton_namespace: ObjectName = "tekton-pipelines"

    # One replica reconciles (the Lease holder); every replica serves the webhook.
    leader_election: bool = True
    leader_election_namespace: ObjectName | None = None  # default: the pod's own namespace
    lease_name: ObjectName = "tekton-coscheduler"
    lease_duration: int = Field(default=15, ge=5, le=300)

    # The server process runs the reconciler as its child; false makes a webhook-only replica.
    reconcile: bool = True
    # On SIGTERM a replica keeps answering admission requests (not ready meanwhile) at least
    # this long, and until its Service's EndpointSlices no longer list it, a margin for the
    # proxies has passed and no call came for 2 s (core/replica/drain.py), at most the second
    # figure; the chart's termination grace is longer.
    shutdown_drain_seconds: float = Field(default=10.0, ge=0, le=600)
    shutdown_drain_max_seconds: float = Field(default=60.0, ge=0, le=600)
    # The Service in front of the webhook, in the pod's namespace (the chart sets it); unset, a
    # replica drains for shutdown_drain_seconds and the calls it still gets.
    webhook_service: ObjectName | None = None

    resync_interval: float = Field(default=30.0, gt=0)
    # A run whose balloon stays as it is, and whose inputs no watch says changed, is reconciled
    # by one round in this many (operator/observe.py): the safety net for what no watch said.
    resync_settled_rounds: int = Field(default=5, ge=1, le=1000)
    # A balloon without a bound pod for this long is reported on its PipelineRun.
    balloon_stuck_after: float = Field(default=20.0, gt=0)
    # A pod of an anchored run the scheduler cannot place for this long is reported.
    pod_stuck_after: float = Field(default=15.0, gt=0)
    api_timeout: float = Field(default=30.0, gt=0)

    def default_policy(self) -> EffectivePolicy:
        """The policy of a namespace without a CoschedulingPolicy."""
        return EffectivePolicy(
            topology_key=self.topology_key,
            isolation=self.isolation,
            image=self.balloon_image,
            resources=self.balloon_resources,
            node_selector=dict(self.balloon_node_selector),
            tolerations=tuple(t.to_k8s() for t in self.balloon_tolerations),
            affinity={},
            priority_class_name=self.balloon_priority_class_name,
            image_pull_secrets=tuple(s.to_k8s() for s in self.balloon_image_pull_secrets),
            capacity=Capacity(anchor=self.capacity_anchor, wait_seconds=self.capacity_wait_seconds),
            warm=Warm(images=self.warm_images),
        )

    @model_validator(mode="after")
    def _cert_pair(self) -> Settings:
        if (self.webhook_cert_file is None) != (self.webhook_key_file is None):
            raise ValueError("webhook_cert_file and webhook_key_file must be set together")
        if bool(self.webhook_tls_secret) != bool(self.webhook_configuration):
            raise ValueError("webhook_tls_secret and webhook_configuration must be set together")
        if self.webhook_tls_secret and self.webhook_cert_file is None:
            raise ValueError("webhook_tls_secret needs webhook_cert_file and webhook_key_file: "
                             "where the server writes the certificate it keeps")
        return self


class SettingsError(Exception):
    """Settings that cannot be used, explained setting by setting."""


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(explain(exc)) from None


def explain(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        setting = (ENV_PREFIX + loc[0].upper()) if loc else "(settings)"
        where = ".".join(loc[1:])
        detail = f" at {where}" if where else ""
        lines.append(f"invalid setting {setting}{detail}: {error['msg']}")
    return "\n".join(lines)
