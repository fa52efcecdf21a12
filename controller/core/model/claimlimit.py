"""Pure: Tekton's one-claim limit while its assistant is on per workspace (`coschedule:
workspaces`, Tekton's default), said rather than hidden.

Tekton (v1.12 to v1.15 alike) checks each TaskRun before it makes its pod: with the assistant
per workspace, `workspace.ValidateOnlyOnePVCIsUsed` (pkg/workspace/validate.go, called from
pkg/reconciler/taskrun/taskrun.go `prepare`) refuses a TaskRun whose workspaces bind more than
one claim: each persistentVolumeClaim by its claim name, each volumeClaimTemplate of the run by
the claim Tekton makes for it (pkg/reconciler/pipelinerun/pipelinerun.go
`taskWorkspaceByWorkspaceVolumeSource`, so two pipeline workspaces on one claim count once).
The TaskRun fails (`TaskRunValidationFailed`: "more than one PersistentVolumeClaim is bound")
and no pod is made: our anchor cannot lift it, the run fails there. The other modes (and
`disabled`) have no such check.

A task's TaskRun binds the pipeline task's workspaces, and, for an embedded taskSpec, those its
steps, sidecars and stepTemplate name without the pipeline task binding them (Tekton propagates
them: pipelinerun.go `propagateWorkspaces`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.basics.notices import Notice
from controller.core.model.assistant import Mode
from controller.core.model.tekton import PipelineRun, _dict, _list, _str, dig, tekton_pvc_name

REASON = "TektonRefusesTaskClaims"
# What Tekton's own words are, on the TaskRun it refuses.
TEKTON_SAYS = 'TaskRunValidationFailed: "more than one PersistentVolumeClaim is bound"'
_USED = re.compile(r"\$\(workspaces\.([^.)\s]+)\.")


@dataclass(frozen=True)
class Refused:
    """A pipeline task whose TaskRun Tekton refuses: the claims it binds, and whether it runs
    whatever happens (no `when`, no `onError: continue`: the run fails then)."""

    task: str
    claims: tuple[str, ...]
    fails_run: bool
    why_not: str = ""  # what may spare the run ("" when it fails)


def _run_claims(run: PipelineRun) -> dict[str, str]:
    """The run's workspace bindings that are claims: workspace name -> the claim a TaskRun
    binds for it (in `workspaces` mode, as Tekton names a templated one then)."""
    out = {}
    for binding in _list(run.spec.get("workspaces")):
        name = _str(_dict(binding).get("name"))
        claim = _str(dig(binding, "persistentVolumeClaim", "claimName"))
        template = _dict(_dict(binding).get("volumeClaimTemplate"))
        if name and claim:
            out[name] = claim
        elif name and template:
            out[name] = tekton_pvc_name(_str(dig(template, "metadata", "name")), name, run.uid)
    return out


def _bound(task: Mapping[str, Any]) -> list[str]:
    """The pipeline workspaces a task's TaskRun binds."""
    bindings = [_dict(b) for b in _list(task.get("workspaces"))]
    names = {_str(b.get("name")) for b in bindings}
    bound = [_str(b.get("workspace")) or _str(b.get("name")) for b in bindings]
    spec = _dict(task.get("taskSpec"))
    if spec:
        parts = [spec.get("steps"), spec.get("sidecars"), spec.get("stepTemplate")]
        used = set(_USED.findall(json.dumps(parts, default=str)))
        bound += sorted(used - names)
    return bound


def refused(run: PipelineRun, mode: Mode | None) -> list[Refused]:
    """The run's tasks whose TaskRuns Tekton refuses in this mode (none while the pipeline is
    not known yet: a pipelineRef Tekton has not resolved)."""
    if mode is not Mode.WORKSPACES:
        return []
    claims = _run_claims(run)
    spec = run.pipeline_spec
    out = []
    for task in [*_list(spec.get("tasks")), *_list(spec.get("finally"))]:
        task = _dict(task)
        bound = sorted({claims[w] for w in _bound(task) if w in claims})
        if len(bound) < 2:
            continue
        why_not = ("it has when expressions: if it runs" if _list(task.get("when"))
                   else "onError: continue: the run goes on" if task.get("onError") == "continue"
                   else "")
        out.append(Refused(_str(task.get("name")), tuple(bound), not why_not, why_not))
    return out


def said(refusals: Sequence[Refused]) -> str:
    """What Tekton does to those tasks, and what to do about it."""
    tasks = "; ".join(
        f"task {r.task} binds {', '.join(r.claims)}" + (f" ({r.why_not})" if r.why_not else "")
        for r in refusals)
    fails = ("; its TaskRun fails, and the run with it" if any(r.fails_run for r in refusals)
             else "")
    return (f"Tekton's affinity assistant is on per workspace (coschedule: workspaces) and "
            f"Tekton refuses a TaskRun that binds more than one claim-backed workspace, before "
            f"its pod is made ({TEKTON_SAYS}; Tekton's pkg/workspace/validate.go "
            f"ValidateOnlyOnePVCIsUsed): {tasks}{fails}")


WHAT_TO_DO = ("bind one claim per task (one workspace with subPaths), or have Tekton's "
              "feature-flags set coschedule to pipelineruns or disabled (cluster-wide); "
              "tekton-coscheduler cannot lift Tekton's check")


def notice(refusals: Sequence[Refused]) -> Notice | None:
    """The Event on the run: a Warning when a refused task makes the run fail, Normal when
    each may be spared (a `when` that skips it, `onError: continue`)."""
    if not refusals:
        return None
    return Notice(REASON, f"{said(refusals)}. What to do: {WHAT_TO_DO}",
                  warning=any(r.fails_run for r in refusals))
