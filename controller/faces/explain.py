"""`explain RUN -n NAMESPACE`: reads what concerns one run, prints core/explain.py's report, or
its document (`-o json|yaml`). Expected failures are said on stderr, with the exit codes of
faces/terminal.py."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from controller.core import explain
from controller.core.basics import names
from controller.core.model import assistant, tekton
from controller.core.placement import balloon
from controller.faces import terminal
from controller.kube.client import Kube
from controller.kube.connection import connect
from controller.kube.inspection import Inspection
from controller.settings import Settings


def observe(settings: Settings, inspect: Inspection, namespace: str, name: str,
            label: terminal.Label) -> explain.Observed:
    kube = inspect.kube
    run = kube.get_pipelinerun(namespace, name)
    if run is None:
        return explain.Observed(None, False, None)
    uid = str((run.get("metadata") or {}).get("uid") or "")
    ns = inspect.get_namespace(namespace) or {}
    labels = (ns.get("metadata") or {}).get("labels") or {}
    flags = inspect.configmap_data(settings.tekton_namespace, tekton.FEATURE_FLAGS_CONFIGMAP)
    sts = kube.get_statefulset(namespace, balloon.balloon_name(uid))
    balloon_pods = kube.list_balloon_pods(namespace, uid) if sts else []
    node_name = next(
        (str(p["spec"]["nodeName"]) for p in balloon_pods if (p.get("spec") or {}).get("nodeName")),
        "",
    )
    pr = tekton.PipelineRun.from_body(run)
    # The run's templated claims as Tekton made them (the mode may have changed since it began).
    made = {n: kube.get_pvc(namespace, n) for n in sorted(
        set(pr.claims_tekton_makes(False)) | set(pr.claims_tekton_makes(True)))}
    per_run = assistant.claims_per_run(pr, {n for n, p in made.items() if p},
                                       assistant.per_run(assistant.mode(flags)))
    claims = {c.name for c in pr.claims(per_run)}
    claims |= balloon.claim_names(sts) if sts else set()
    pvcs = {c: made[c] if c in made else kube.get_pvc(namespace, c) for c in sorted(claims)}
    volumes = {str((p.get("spec") or {}).get("volumeName")) for p in pvcs.values() if p}
    return explain.Observed(
        run=run,
        namespace_enabled=labels.get(label.key) == label.value,
        balloon=sts,
        balloon_pods=balloon_pods,
        node=inspect.get_node(node_name) if node_name else None,
        pods=inspect.list_pods(namespace, f"tekton.dev/pipelineRun={name}"),
        pvcs=pvcs,
        pvs={v: kube.get_pv(v) for v in sorted(volumes) if v and v != "None"},
        events=[e for e in inspect.list_events(namespace, uid)
                if (e.get("source") or {}).get("component") == names.APP
                or e.get("reportingComponent") == names.APP],
        label=label.key, label_value=label.value, label_source=label.source,
        tekton_flags=flags,
    )


def run(settings: Settings, target: str, *, namespace: str | None = None,
        kubeconfig: str | None = None, context: str | None = None, output: str = "text",
        operator_namespace: str | None = None, service_account: str | None = None,
        out: Callable[[str], Any] = print,
        err: Callable[[str], Any] = lambda s: print(s, file=sys.stderr)) -> int:
    """RUN, with -n NAMESPACE or the context's namespace; NAMESPACE/RUN is taken too."""
    given, slash, name = target.rpartition("/")
    if not slash:
        given, name = "", target
    if (slash and not given) or not name or "/" in given or (
            given and namespace and given != namespace):
        err(f"error: {target!r}: name a PipelineRun as RUN (with -n NAMESPACE) or NAMESPACE/RUN")
        return terminal.USAGE
    try:
        where = connect(kubeconfig, context)
        inspect = Inspection(Kube(where.client, timeout=10))
        ns = given or namespace or where.namespace
        ref = terminal.operator_ref(where, operator_namespace, service_account)
        observed = observe(settings, inspect, ns, name,
                           terminal.configured_label(settings, inspect, ref))
    except Exception as exc:
        said = terminal.failure(exc)
        if said is None:
            raise
        err(f"error: cannot read the run: {said}")
        return terminal.UNREACHABLE
    if observed.run is None:
        err(f"error: PipelineRun {ns}/{name} not found")
        return terminal.NOT_FOUND
    doc = explain.document(observed)
    terminal.emit(doc, output, explain.render(doc), out)
    sys.stdout.flush()
    return terminal.PROBLEMS if doc["problems"] else terminal.OK
