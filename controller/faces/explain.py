"""`tekton-coscheduler explain NAMESPACE/RUN`: reads what concerns one run, prints
core/explain.py's report."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from controller.core import balloon, explain, names, tekton
from controller.kube.client import ApiError, Kube
from controller.kube.connection import load_client_config
from controller.kube.inspection import Inspection
from controller.settings import Settings


def observe(settings: Settings, inspect: Inspection, namespace: str, name: str) -> explain.Observed:
    kube = inspect.kube
    run = kube.get_pipelinerun(namespace, name)
    if run is None:
        return explain.Observed(None, False, False, None)
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
    claims = {c.name for c in tekton.PipelineRun.from_body(run).claims()}
    claims |= balloon.claim_names(sts) if sts else set()
    pvcs = {c: kube.get_pvc(namespace, c) for c in sorted(claims)}
    volumes = {str((p.get("spec") or {}).get("volumeName")) for p in pvcs.values() if p}
    return explain.Observed(
        run=run,
        namespace_enabled=labels.get(settings.namespace_label) == settings.namespace_label_value,
        assistant_on=tekton.assistant_enabled(flags) and not settings.ignore_tekton_assistant,
        balloon=sts,
        balloon_pods=balloon_pods,
        node=inspect.get_node(node_name) if node_name else None,
        pods=inspect.list_pods(namespace, f"tekton.dev/pipelineRun={name}"),
        pvcs=pvcs,
        pvs={v: kube.get_pv(v) for v in sorted(volumes) if v and v != "None"},
        events=[e for e in inspect.list_events(namespace, uid)
                if (e.get("source") or {}).get("component") == names.APP
                or e.get("reportingComponent") == names.APP],
    )


def run(settings: Settings, target: str, out: Callable[[str], Any] = print) -> int:
    namespace, _, name = target.partition("/")
    if not namespace or not name:
        out("usage: tekton-coscheduler explain NAMESPACE/RUN")
        return 2
    try:
        inspect = Inspection(Kube(load_client_config(), timeout=10))
        observed = observe(settings, inspect, namespace, name)
    except (ApiError, OSError) as exc:
        out(f"cannot read the run: {exc}")
        return 1
    for line in explain.report(observed):
        out(line)
    sys.stdout.flush()
    return 0 if observed.run is not None else 1
