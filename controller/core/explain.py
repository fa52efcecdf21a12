"""Pure: `explain RUN`, what one run's objects say, for a person and for a program.

Everything comes in as the API server's objects (faces/explain.py reads them); this module only
decides what they say: the anchor and why it is there, each pod with its node and state, the
claims with their volumes and nodes, and every problem known, with what to do about it. One
document holds it all (`document`, what `-o json|yaml` prints, its shape kept stable: KIND and
VERSION name it); the text a person reads is rendered from that document alone (`render`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.core.admission import affinity
from controller.core.basics import names
from controller.core.capacity import nodes
from controller.core.model import assistant, claimlimit, tekton
from controller.core.model.pods import scheduled_condition
from controller.core.placement import anchor, gate, waiting, warm

KIND, VERSION = "RunExplanation", 1
Said = Callable[[str, str | None], None]  # a problem, and what to do about it
MOBILITY_SAID = {None: "-", anchor.Mobility.UNBOUND.value: "yes (not bound yet)",
                 anchor.Mobility.FOLLOWS.value: "yes",
                 anchor.Mobility.NODE_LOCAL.value: "no (on that node only)"}


@dataclass(frozen=True)
class Observed:
    run: Mapping[str, Any] | None
    namespace_enabled: bool
    balloon: Mapping[str, Any] | None  # the StatefulSet
    balloon_pods: Sequence[Mapping[str, Any]] = ()
    node: Mapping[str, Any] | None = None  # the anchor's node
    pods: Sequence[Mapping[str, Any]] = ()  # the run's TaskRun pods
    pvcs: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    pvs: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    events: Sequence[Mapping[str, Any]] = ()  # ours, on the run
    # The label namespaces opt in with, as the operator is configured, and where that was read.
    label: str = names.NAMESPACE_LABEL
    label_value: str = "true"
    label_source: str = "the default"
    # Tekton's feature-flags data (None: the ConfigMap is absent, Tekton's defaults hold).
    tekton_flags: Mapping[str, Any] | None = None


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def report(o: Observed) -> list[str]:
    return ["run: not found"] if o.run is None else render(document(o))


def document(o: Observed) -> dict[str, Any]:
    """What is known of the run, in the shape `-o json|yaml` prints (docs/reference/cli.md)."""
    if o.run is None:
        return {"kind": KIND, "version": VERSION, "run": None, "problems": []}
    run = tekton.PipelineRun.from_body(o.run)
    problems: list[dict[str, str | None]] = []

    def problem(what: str, do: str | None) -> None:
        problems.append({"problem": what, "whatToDo": do})

    label = f"{o.label}={o.label_value}"
    if not o.namespace_enabled:
        problem(f"namespace {run.namespace} has not opted in",
                f"label it {label}: kubectl label namespace {run.namespace} {label}")
    placed = _anchor(o, problem)
    node_name = (placed or {}).get("node") or ""
    pods = _pods(o, node_name, problem)
    claims = _claims(o, node_name)
    refusals = claimlimit.refused(run, assistant.mode(o.tekton_flags))
    if refusals:
        problem(claimlimit.said(refusals), claimlimit.WHAT_TO_DO)
    for event in o.events:
        if event.get("type") == "Warning" and event.get("reason") != claimlimit.REASON:
            problem(f"{event.get('reason')}: {event.get('message')}", None)
    return {
        "kind": KIND, "version": VERSION,
        "run": {"namespace": run.namespace, "name": run.name, "uid": run.uid,
                "state": _state(run), "optedOut": run.opted_out},
        "namespace": {"name": run.namespace, "optedIn": o.namespace_enabled, "label": label,
                      "labelSource": o.label_source},
        "anchor": placed, "pods": pods, "claims": claims, "problems": problems,
    }


def _state(run: tekton.PipelineRun) -> str:
    if run.finished:
        return "finished, " + ("succeeded" if run.succeeded_status == "True" else "failed")
    if run.pending:
        return "pending (no balloon until it starts)"
    return "running"


def _anchor(o: Observed, problem: Said) -> dict[str, Any] | None:
    if o.balloon is None:
        return None
    pods = [p for p in o.balloon_pods if not _meta(p).get("deletionTimestamp")]
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    if not bound:
        cond = scheduled_condition(pods[0]) if pods else {}
        message = str(cond.get("message") or "its pod does not exist (quota, admission?)")
        problem(f"the balloon has no node: {message}",
                "free what the scheduler names, or relax the run's pod template")
        return {"node": None, "balloonPod": None, "waiting": message}
    pod = bound[0]
    node_name = str(pod["spec"]["nodeName"])
    spec = ((o.balloon.get("spec") or {}).get("template") or {}).get("spec") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(affinity.REQUIRED)
    note = warm.noted(_meta(o.balloon).get("annotations", {}).get(warm.ANNOTATION))
    warmth = warm.said(note, node_name, note.held(
        warm.node_images(o.node) if o.node is not None else None, node_name))
    reason = nodes.unavailable(o.node, spec.get("tolerations") or [])
    if reason:
        problem(f"the anchor's node is {reason}",
                "the anchor moves once no pod of the run runs there and its claims can "
                "follow; see the AnchorNodeUnavailable event")
    return {
        "node": node_name, "balloonPod": _meta(pod).get("name"), "waiting": None,
        "constraints": {
            "nodeSelector": dict(spec.get("nodeSelector") or {}),
            "requiredNodeAffinity": bool(required),
            "tolerations": len(spec.get("tolerations") or []),
            "claims": [v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes") or []
                       if isinstance(v.get("persistentVolumeClaim"), dict)],
        },
        "warm": warmth or None, "nodeUnavailable": reason,
    }


def _pods(o: Observed, node_name: str, problem: Said) -> list[dict[str, Any]]:
    found = []
    for pod in sorted(o.pods, key=lambda p: str(_meta(p).get("name"))):
        meta, spec = _meta(pod), pod.get("spec") or {}
        held = gate.held(spec)
        if held and node_name:
            problem(f"pod {meta.get('name')} is still gated, its anchor bound",
                    "the leader takes the gate off: is a replica of tekton-coscheduler "
                    "leading? (its logs, its Lease)")
        cond = scheduled_condition(pod)
        if not spec.get("nodeName") and cond.get("reason") == "Unschedulable":
            msg = str(cond.get("message") or "")
            problem(f"pod {meta.get('name')} waits: {msg}",
                    f"it needs {waiting.reason_of(msg)} on node {node_name or '?'}")
        found.append({
            "name": str(meta.get("name")),
            "task": str((meta.get("labels") or {}).get("tekton.dev/pipelineTask", "")),
            "node": spec.get("nodeName") or None,
            "phase": str((pod.get("status") or {}).get("phase") or ""),
            "tiedToBalloon": bool(affinity.balloon_terms(spec)), "gated": held,
        })
    return found


def _claims(o: Observed, node_name: str) -> list[dict[str, Any]]:
    found = []
    for name in sorted(o.pvcs):
        pvc = o.pvcs[name]
        volume = str(((pvc or {}).get("spec") or {}).get("volumeName") or "")
        pv = o.pvs.get(volume) if volume else None
        mobility = (
            anchor.claim_mobility(pvc, pv, node_name) if pvc is not None and node_name else None
        )
        found.append({"name": name, "missing": pvc is None, "volume": volume or None,
                      "where": _where(pv), "mobility": mobility.value if mobility else None})
    return found


def _where(pv: Mapping[str, Any] | None) -> str | None:
    terms = ((((pv or {}).get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get(
        "nodeSelectorTerms") or []
    for term in terms:
        for expr in term.get("matchExpressions") or []:
            if expr.get("operator") == "In":
                return f"{expr.get('key')}={','.join(expr.get('values') or [])}"
    return None


def render(doc: Mapping[str, Any]) -> list[str]:
    """The text a person reads, from the document alone."""
    run, ns = doc["run"], doc["namespace"]
    out = [f"run: {run['namespace']}/{run['name']} (uid {run['uid']})",
           f"  state: {run['state']}",
           f"  namespace {ns['name']}: {'opted in' if ns['optedIn'] else 'not opted in'} "
           f"(label {ns['label']}, {ns['labelSource']})"]
    if run["optedOut"]:
        out.append("  opted out (annotation tekton-coscheduler.dev/coschedule: \"false\")")
    out.extend(_render_anchor(doc["anchor"]))
    if doc["pods"]:
        rows = [["POD", "TASK", "NODE", "PHASE", "TIED TO THE BALLOON"]]
        rows += [[p["name"], p["task"], p["node"] or "-", p["phase"],
                  ("yes" if p["tiedToBalloon"] else "no")
                  + (", gated until the anchor is bound" if p["gated"] else "")]
                 for p in doc["pods"]]
        out += ["pods:", *_table(rows)]
    else:
        out.append("pods: none yet")
    if doc["claims"]:
        rows = [["CLAIM", "VOLUME", "WHERE", "CAN FOLLOW A MOVED ANCHOR"]]
        rows += [[c["name"], c["volume"] or ("(missing)" if c["missing"] else "(not bound)"),
                  c["where"] or "-", MOBILITY_SAID[c["mobility"]]] for c in doc["claims"]]
        out += ["claims:", *_table(rows)]
    else:
        out.append("claims: none")
    out.append("problems:" if doc["problems"] else "problems: none known")
    for p in doc["problems"]:
        out.append(f"  - {p['problem']}")
        if p["whatToDo"]:
            out.append(f"    what to do: {p['whatToDo']}")
    return out


def _render_anchor(placed: Mapping[str, Any] | None) -> list[str]:
    if placed is None:
        return ["anchor: no balloon"]
    if placed["node"] is None:
        return [f"anchor: not placed yet ({placed['waiting']})"]
    node_name, c = placed["node"], placed["constraints"]
    why = [f"nodeSelector {c['nodeSelector']}"] if c["nodeSelector"] else []
    if c["requiredNodeAffinity"]:
        why.append("the run's required node affinity")
    if c["tolerations"]:
        why.append(f"{c['tolerations']} toleration(s) the run's pods carry")
    if c["claims"]:
        why.append(f"where claims {', '.join(c['claims'])} can be")
    out = [f"anchor: node {node_name} (balloon pod {placed['balloonPod']})",
           "  chosen by the scheduler among nodes that meet "
           + ("; ".join(why) if why else "no constraint: any node with room for it")]
    if placed["warm"]:
        out.append(f"  where it starts fastest: {placed['warm']}")
    if placed["nodeUnavailable"]:
        out.append(f"  node {node_name} is {placed['nodeUnavailable']}")
    return out


def operator_env(deployments: Sequence[Mapping[str, Any]],
                 service_account: str) -> tuple[str, dict[str, str]] | None:
    """The operator's Deployment among a namespace's, and its containers' COSCHEDULER_*
    settings given as values: (its name, {variable: value}); None when none is the operator's.
    The operator's is one whose pods run as its ServiceAccount and set COSCHEDULER_ variables;
    found so, not by name, it is found whatever the release was called."""
    for dep in deployments:
        spec = ((dep.get("spec") or {}).get("template") or {}).get("spec") or {}
        env = {str(e.get("name")): str(e["value"])
               for c in spec.get("containers") or [] for e in c.get("env") or []
               if str(e.get("name", "")).startswith("COSCHEDULER_") and "value" in e}
        if env and (spec.get("serviceAccountName") or "default") == service_account:
            return str(_meta(dep).get("name")), env
    return None
