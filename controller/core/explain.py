"""Pure: `tekton-coscheduler explain NAMESPACE/RUN`, the report a person reads at a terminal.

Everything comes in as the API server's objects (faces/explain.py reads them); this module only
decides what they say: the anchor and why it is there, each pod with its node and state, the
claims with their volumes and nodes, and every problem known, with what to do about it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.core import affinity, anchor, gate, nodes, tekton, waiting, warm
from controller.core.pods import scheduled_condition


@dataclass(frozen=True)
class Observed:
    run: Mapping[str, Any] | None
    namespace_enabled: bool
    assistant_on: bool
    balloon: Mapping[str, Any] | None  # the StatefulSet
    balloon_pods: Sequence[Mapping[str, Any]] = ()
    node: Mapping[str, Any] | None = None  # the anchor's node
    pods: Sequence[Mapping[str, Any]] = ()  # the run's TaskRun pods
    pvcs: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    pvs: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    events: Sequence[Mapping[str, Any]] = ()  # ours, on the run


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def report(o: Observed) -> list[str]:
    if o.run is None:
        return ["run: not found"]
    run = tekton.PipelineRun.from_body(o.run)
    out = [f"run: {run.namespace}/{run.name} (uid {run.uid})", f"  state: {_state(run)}"]
    problems: list[tuple[str, str]] = []
    if not o.namespace_enabled:
        problems.append((f"namespace {run.namespace} has not opted in",
                         "label it tekton-coscheduler.dev/enabled=true"))
    if run.opted_out:
        out.append("  opted out (annotation tekton-coscheduler.dev/coschedule: \"false\")")
    if o.assistant_on:
        problems.append(("Tekton's own affinity assistant is on: no balloon is made",
                         "set coschedule: disabled in Tekton's feature-flags"))
    node_name = _anchor(o, out, problems)
    _pods(o, node_name, out, problems)
    _claims(o, node_name, out)
    for event in o.events:
        if event.get("type") == "Warning":
            problems.append((f"{event.get('reason')}: {event.get('message')}", ""))
    out.append("problems:" if problems else "problems: none known")
    for what, do in problems:
        out.append(f"  - {what}")
        if do:
            out.append(f"    what to do: {do}")
    return out


def _state(run: tekton.PipelineRun) -> str:
    if run.finished:
        return "finished, " + ("succeeded" if run.succeeded_status == "True" else "failed")
    if run.pending:
        return "pending (no balloon until it starts)"
    return "running"


def _anchor(o: Observed, out: list[str], problems: list[tuple[str, str]]) -> str:
    if o.balloon is None:
        out.append("anchor: no balloon")
        return ""
    pods = [p for p in o.balloon_pods if not _meta(p).get("deletionTimestamp")]
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    if not bound:
        cond = scheduled_condition(pods[0]) if pods else {}
        message = str(cond.get("message") or "its pod does not exist (quota, admission?)")
        out.append(f"anchor: not placed yet ({message})")
        problems.append((f"the balloon has no node: {message}",
                         "free what the scheduler names, or relax the run's pod template"))
        return ""
    pod = bound[0]
    node_name = str(pod["spec"]["nodeName"])
    out.append(f"anchor: node {node_name} (balloon pod {_meta(pod).get('name')})")
    spec = ((o.balloon.get("spec") or {}).get("template") or {}).get("spec") or {}
    why = []
    if spec.get("nodeSelector"):
        why.append(f"nodeSelector {spec['nodeSelector']}")
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(affinity.REQUIRED)
    if required:
        why.append("the run's required node affinity")
    if spec.get("tolerations"):
        why.append(f"{len(spec['tolerations'])} toleration(s) the run's pods carry")
    claims = [v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes") or []
              if isinstance(v.get("persistentVolumeClaim"), dict)]
    if claims:
        why.append(f"where claims {', '.join(claims)} can be")
    out.append("  chosen by the scheduler among nodes that meet "
               + ("; ".join(why) if why else "no constraint: any node with room for it"))
    note = warm.noted(_meta(o.balloon).get("annotations", {}).get(warm.ANNOTATION))
    warmth = warm.said(note, node_name, note.held(
        warm.node_images(o.node) if o.node is not None else None, node_name))
    if warmth:
        out.append(f"  where it starts fastest: {warmth}")
    reason = nodes.unavailable(o.node, spec.get("tolerations") or [])
    if reason:
        out.append(f"  node {node_name} is {reason}")
        problems.append((f"the anchor's node is {reason}",
                         "the anchor moves once no pod of the run runs there and its claims "
                         "can follow; see the AnchorNodeUnavailable event"))
    return node_name


def _pods(o: Observed, node_name: str, out: list[str], problems: list[tuple[str, str]]) -> None:
    if not o.pods:
        out.append("pods: none yet")
        return
    rows = [["POD", "TASK", "NODE", "PHASE", "TIED TO THE BALLOON"]]
    for pod in sorted(o.pods, key=lambda p: str(_meta(p).get("name"))):
        meta, spec = _meta(pod), pod.get("spec") or {}
        tied = "yes" if affinity.balloon_terms(spec) else "no"
        if gate.held(spec):
            tied += ", gated until the anchor is bound"
            if node_name:
                problems.append((f"pod {meta.get('name')} is still gated, its anchor bound",
                                 "the leader takes the gate off: is a replica of "
                                 "tekton-coscheduler leading? (its logs, its Lease)"))
        phase = str((pod.get("status") or {}).get("phase") or "")
        rows.append([str(meta.get("name")), str((meta.get("labels") or {}).get(
            "tekton.dev/pipelineTask", "")), str(spec.get("nodeName") or "-"), phase, tied])
        cond = scheduled_condition(pod)
        if not spec.get("nodeName") and cond.get("reason") == "Unschedulable":
            msg = str(cond.get("message") or "")
            problems.append((f"pod {meta.get('name')} waits: {msg}",
                             f"it needs {waiting.reason_of(msg)} on node {node_name or '?'}"))
    out.append("pods:")
    out.extend(_table(rows))


def _claims(o: Observed, node_name: str, out: list[str]) -> None:
    if not o.pvcs:
        out.append("claims: none")
        return
    rows = [["CLAIM", "VOLUME", "WHERE", "CAN FOLLOW A MOVED ANCHOR"]]
    for name in sorted(o.pvcs):
        pvc = o.pvcs[name]
        volume = str(((pvc or {}).get("spec") or {}).get("volumeName") or "")
        pv = o.pvs.get(volume) if volume else None
        mobility = (
            anchor.claim_mobility(pvc, pv, node_name) if pvc is not None and node_name else None
        )
        rows.append([name, volume or ("(missing)" if pvc is None else "(not bound)"),
                     _where(pv), {None: "-", anchor.Mobility.UNBOUND: "yes (not bound yet)",
                                  anchor.Mobility.FOLLOWS: "yes",
                                  anchor.Mobility.NODE_LOCAL: "no (on that node only)"}[mobility]])
    out.append("claims:")
    out.extend(_table(rows))


def _where(pv: Mapping[str, Any] | None) -> str:
    terms = ((((pv or {}).get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get(
        "nodeSelectorTerms") or []
    for term in terms:
        for expr in term.get("matchExpressions") or []:
            if expr.get("operator") == "In":
                return f"{expr.get('key')}={','.join(expr.get('values') or [])}"
    return "-"
