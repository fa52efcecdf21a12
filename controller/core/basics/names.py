"""The names users see (DESIGN section 3). Keep them stable."""

from typing import Final

DOMAIN: Final = "tekton-coscheduler.dev"
APP: Final = "tekton-coscheduler"

NAMESPACE_LABEL: Final = f"{DOMAIN}/enabled"
OPT_OUT_ANNOTATION: Final = f"{DOMAIN}/coschedule"

LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_RUN: Final = f"{DOMAIN}/pipeline-run"
LABEL_RUN_UID: Final = f"{DOMAIN}/pipeline-run-uid"
COMPONENT_BALLOON: Final = "balloon"
COMPONENT_RESERVATION: Final = "reservation"
COMPONENT_BUDGET: Final = "budget"
# On a balloon and its pod: its namespace's PodDisruptionBudget covers it
# (core/placement/budget.py). Balloons made before there was one budget a namespace have their own
# and not this label.
LABEL_BUDGET: Final = f"{DOMAIN}/budget"
BUDGET_NAMESPACE: Final = "namespace"

# The mark of a run that has a balloon, on the PipelineRun and its TaskRuns (Tekton copies it to
# their pods): its value is the run's UID, and the annotation the topology key it was anchored
# with. Admission keeps tying such a run's pods to its balloon to the run's end
# (core/placement/mark.py).
LABEL_ANCHORED: Final = f"{DOMAIN}/anchored"
ANNOTATION_TOPOLOGY_KEY: Final = f"{DOMAIN}/topology-key"
# Which installation anchored it: its namespace label, as `label=value`.
ANNOTATION_ANCHORED_BY: Final = f"{DOMAIN}/anchored-by"
# On a pod admission tied to a balloon while its run was not marked yet (its first pods): with
# the mark and our own pods' label, what the leader's pod watches select (faces/streams.py).
LABEL_TIED: Final = f"{DOMAIN}/tied"

# Written on our own StatefulSet only.
ANNOTATION_ANCHORED_NODE: Final = f"{DOMAIN}/anchored-node"
ANNOTATION_RUN_CREATED: Final = f"{DOMAIN}/pipeline-run-created"

POLICY_GROUP: Final = DOMAIN
POLICY_VERSION: Final = "v1alpha1"
POLICY_PLURAL: Final = "coschedulingpolicies"
POLICY_KIND: Final = "CoschedulingPolicy"

BALLOON_SELECTOR: Final = f"{LABEL_MANAGED_BY}={APP},{LABEL_COMPONENT}={COMPONENT_BALLOON}"
BUDGET_SELECTOR: Final = f"{LABEL_MANAGED_BY}={APP},{LABEL_COMPONENT}={COMPONENT_BUDGET}"
