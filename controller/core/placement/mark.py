"""Pure: the mark of an anchored run. A run that was anchored stays anchored to its end.

Switching a namespace off, opting a run out or changing the namespace's policy affects runs
that start afterwards. A run the operator has made a balloon (or a reservation) for is marked:
the label `tekton-coscheduler.dev/anchored: <run uid>` and the annotation
`tekton-coscheduler.dev/topology-key: <key>` go on the PipelineRun and its TaskRuns. Tekton
copies both to the TaskRuns it makes afterwards and to every pod, so admission, in either mode,
recognises a pod of an anchored run from the pod alone: it keeps the term, with the key the run
was anchored with, wherever the namespace's label and policy now stand. The label's value is
the run's UID: a run made from another's manifest (a copied label) is not taken for it. A
third, `tekton-coscheduler.dev/anchored-by`, names the installation that anchored the run (its
namespace label): only that one keeps serving the run once its namespace is no longer enabled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from controller.core.basics import names
from controller.core.basics.fragments import is_qualified_name
from controller.core.model import tekton


def of(labels: Mapping[str, Any], run_uid: str) -> bool:
    """Does an object with these labels carry the mark of the run?"""
    return bool(run_uid) and labels.get(names.LABEL_ANCHORED) == run_uid


def by(run: tekton.PipelineRun, installation: str) -> bool:
    """Did this installation (`label=value`) anchor the run?"""
    return of(run.labels, run.uid) and run.annotations.get(names.ANNOTATION_ANCHORED_BY) == (
        installation)


def pod_anchored(labels: Mapping[str, Any]) -> bool:
    """Is this a pod of a marked run (the mark names the run the pod's labels name)?"""
    return of(labels, str(labels.get(tekton.LABEL_PIPELINE_RUN_UID) or ""))


def topology_key(annotations: Mapping[str, Any]) -> str | None:
    """The topology key a marked run was anchored with; None when absent or not a valid key."""
    key = annotations.get(names.ANNOTATION_TOPOLOGY_KEY)
    return key if isinstance(key, str) and is_qualified_name(key) else None


def ready(run: tekton.PipelineRun) -> bool:
    """Has Tekton made its own first writes to the run (its labels, and the pipeline it
    resolved)? Tekton writes labels with an Update that fails (and is said on the run as a
    Warning) when something else wrote the run meanwhile: the mark waits for them."""
    return bool(run.labels.get(tekton.LABEL_PIPELINE)) and bool(run.status.get("pipelineSpec"))


# The tied label's JSON-pointer path (RFC 6901 escapes), built once: admission's hot path.
_TIED_PATH: Final = "/metadata/labels/" + names.LABEL_TIED.replace("~", "~0").replace("/", "~1")


def tie(labels: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSONPatch operation that labels a pod admission ties to a balloon before its run is
    marked (names.LABEL_TIED): the leader watches the pods it serves by these labels, so the
    pods of runs it does not serve never reach it. A marked run's pods carry the mark instead
    (a pod carries one or the other, never both: the leader's watches do not overlap)."""
    if names.LABEL_TIED in labels:
        return []
    return [{"op": "add", "path": _TIED_PATH, "value": "true"}]


def patch(run_uid: str, key: str, installation: str) -> dict[str, Any]:
    """The merge patch that marks a PipelineRun or a TaskRun of the run."""
    return {"metadata": {
        "labels": {names.LABEL_ANCHORED: run_uid},
        "annotations": {names.ANNOTATION_TOPOLOGY_KEY: key,
                        names.ANNOTATION_ANCHORED_BY: installation},
    }}


def unmarked(task_runs: Sequence[Mapping[str, Any]], run_uid: str) -> list[str]:
    """The names of the run's TaskRuns (made before the run was marked) that lack the mark,
    among those Tekton has made a pod for (it has written their labels by then)."""
    return [
        str((tr.get("metadata") or {}).get("name"))
        for tr in task_runs
        if not of((tr.get("metadata") or {}).get("labels") or {}, run_uid)
        and (tr.get("status") or {}).get("podName")
    ]
