"""The API access the operator needs, in one place: `check` verifies it, the chart grants it."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.basics import names
from controller.core.model import resolution, tekton


@dataclass(frozen=True)
class Access:
    group: str
    resource: str
    verbs: tuple[str, ...]
    why: str
    # Where: "cluster", "tekton" (Tekton's namespace) or "own" (the Lease's namespace).
    scope: str = "cluster"


REQUIRED: tuple[Access, ...] = (
    Access(tekton.GROUP, "pipelineruns", ("get", "list", "watch", "patch"),
           "watch runs; mark a run given a balloon (it stays anchored to its end)"),
    Access(tekton.GROUP, "taskruns", ("list", "patch"),
           "mark the TaskRuns made before their run was marked"),
    Access(tekton.GROUP, "tasks", ("get", "list", "watch"), "a run's peak: its tasks' specs"),
    Access(tekton.GROUP, "pipelines", ("get", "list", "watch"), "a run's peak: its pipeline"),
    Access(resolution.GROUP, resolution.PLURAL, ("list", "watch"),
           "a run's peak: the tasks and pipeline Tekton's resolvers fetched for it"),
    Access("", "limitranges", ("list", "watch"), "a run's peak: what LimitRanges give its pods"),
    Access("", "resourcequotas", ("list", "watch"),
           "a reservation takes only what a team's quota leaves free"),
    Access(
        "apps",
        "statefulsets",
        ("get", "list", "watch", "create", "patch", "delete"),
        "the balloons",
    ),
    Access(
        "",
        "pods",
        ("get", "list", "watch", "create", "delete", "patch"),
        "balloon placement, misplaced pods; delete a balloon pod that is unbound or moves; "
        "reservation pods; take the scheduling gate off a run's pods once it is anchored",
    ),
    Access(
        "",
        "persistentvolumeclaims",
        ("get", "list", "watch"),
        "find the claims a run owns (a watch cache); can they follow an anchor that moves",
    ),
    Access("", "persistentvolumes", ("get",), "is a claim's volume bound to one node"),
    Access("", "nodes", ("get", "list", "watch"),
           "anchors on nodes that go away; what the nodes a run may use can hold"),
    Access("karpenter.sh", "nodepools", ("list",),
           "can Karpenter add a node for a run larger than every node"),
    Access(
        "policy",
        "poddisruptionbudgets",
        ("create", "list", "watch", "delete"),
        "the budget of each namespace with balloons: no eviction takes an anchor from under a "
        "running task",
    ),
    Access("", "namespaces", ("get", "list", "watch"), "which namespaces opted in"),
    Access("", "events", ("create", "list"), "tell run owners what happened; `explain` reads"),
    Access(
        "",
        "configmaps",
        ("get", "list", "watch"),
        "Tekton's feature-flags and config-defaults",
        scope="tekton",
    ),
    Access(
        names.POLICY_GROUP, names.POLICY_PLURAL, ("get", "list", "watch"), "per-namespace policy"
    ),
    Access(names.POLICY_GROUP, f"{names.POLICY_PLURAL}/status", ("patch",), "report policy status"),
    Access(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        ("get", "list", "watch"),
        "kopf notices CRDs installed after it started; `check` reads ours and Tekton's",
    ),
    Access(
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicies",
        ("get",),
        "policy mode: the chart's policy, owner of the bindings",
    ),
    Access(
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings",
        ("get", "list", "watch", "create", "update", "delete"),
        "policy mode: the bindings (default, and per namespace with its own topologyKey)",
    ),
    Access(
        "discovery.k8s.io",
        "endpointslices",
        ("list",),
        "webhook mode: a replica told to stop answers until its Service's endpoints drop it",
        scope="own",
    ),
    Access(
        "coordination.k8s.io",
        "leases",
        ("get", "create", "update"),
        "leader election: which replica reconciles",
        scope="own",
    ),
)

# The chart's `controller` TLS mode (kube/webhook_tls.py) needs these too, each limited by the
# chart to the one object's name where the verb allows (a create cannot be).
SELF_MANAGED_TLS: tuple[Access, ...] = (
    Access("", "secrets", ("get", "create"),
           "webhook.tls.mode controller: the Secret keeping the webhook's CA and certificate",
           scope="own"),
    Access("admissionregistration.k8s.io", "mutatingwebhookconfigurations", ("get", "patch"),
           "webhook.tls.mode controller: the CA in the webhook configuration's caBundle"),
)
