"""Which calls of the operator's API clients write and which only read: the one list the write
recorder (tests/operator/recording.py) and the read-only client (tests/readonly.py) share.

The clients are kube/client.py's `Kube` (over kube/api.py's `Api`) and
kube/admission_policies.py's `AdmissionPolicies`. tests/test_readonly.py fails when one of
them gains a public method that is in neither list, so that a new write cannot slip past
both the record and the read-only client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Each write of the clients by name, and the request it sends: (verb, kind). A notifier's
# `tell` is no client call: the test fakes that stand in for the whole notifier
# (tests/operator/test_placement.py, test_anchors.py) are recorded through it as Events.
WRITES: Mapping[str, tuple[str, str]] = {
    "create_statefulset": ("create", "StatefulSet"),
    "replace_balloon_template": ("patch", "StatefulSet"),
    "annotate_statefulset": ("patch", "StatefulSet"),
    "delete_statefulset": ("delete", "StatefulSet"),
    "create_pod": ("create", "Pod"),
    "delete_pod": ("delete", "Pod"),
    "release_pod_gate": ("patch", "Pod"),
    "create_pdb": ("create", "PodDisruptionBudget"),
    "delete_pdb": ("delete", "PodDisruptionBudget"),
    "patch_tekton": ("patch", ""),  # PipelineRun or TaskRun: by its `plural`
    "patch_policy_status": ("patch", "CoschedulingPolicy/status"),
    "create_lease": ("create", "Lease"),
    "replace_lease": ("update", "Lease"),
    "post_event": ("event", ""),  # the kind of the object it is about
    "create_binding": ("create", "MutatingAdmissionPolicyBinding"),
    "replace_binding": ("update", "MutatingAdmissionPolicyBinding"),
    "delete_binding": ("delete", "MutatingAdmissionPolicyBinding"),
}

READS = frozenset({
    # Kube
    "get_statefulset", "list_balloons", "list_balloon_pods", "list_run_pods", "list_pvcs",
    "get_pvc", "get_pv", "get_pipelinerun", "list_pipelineruns", "list_nodes",
    "list_endpoint_slices", "list_unscheduled_placeholders",
    "list_task_runs", "list_nodepools", "list_policies", "get_lease", "event_messages",
    # Api
    "items", "get_or_none",
    # AdmissionPolicies
    "get_policy", "list_bindings",
})

# By path and method: a write unless the method is GET (or a review, below).
BY_METHOD = frozenset({"request", "json", "send"})
# A SelfSubjectAccessReview is a POST that makes nothing: the API server answers and keeps
# nothing (kube/inspection.py's can_i).
REVIEWS = ("/selfsubjectaccessreviews", "/subjectaccessreviews")

# Plain attributes of the clients, no calls: what a wrapper hands through.
ATTRIBUTES = frozenset({"api", "timeout", "leadership", "core", "apps", "custom", "policy",
                        "kube", "version"})


def writes_by_method(method: str, url_path: str) -> bool:
    """Whether a request by path (Api.request, json, send) writes."""
    if method.upper() in ("GET", "HEAD"):
        return False
    return not (method.upper() == "POST" and url_path.endswith(REVIEWS))


def method_and_path(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, str]:
    """The (method, url_path) of a call of Api.request, json or send."""
    method = args[0] if args else kwargs.get("method", "")
    url_path = args[1] if len(args) > 1 else kwargs.get("url_path", "")
    return str(method), str(url_path)
