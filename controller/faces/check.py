"""`tekton-coscheduler check`: are the settings and the cluster ready for the operator?"""

from __future__ import annotations

import sys
from collections.abc import Callable

from controller.core import names, tekton, versions
from controller.kube import access
from controller.kube.client import ApiError, Kube
from controller.kube.connection import load_client_config
from controller.kube.inspection import Inspection
from controller.kube.leadership import default_namespace
from controller.settings import Settings

OK, WARN, FAIL = "ok", "warn", "FAIL"


def check(settings: Settings, out: Callable[[str], None] = print) -> int:
    results: list[tuple[str, str, str]] = [(OK, "settings", "valid")]

    def say(level: str, what: str, detail: str) -> None:
        results.append((level, what, detail))

    try:
        kube = Inspection(Kube(load_client_config(), timeout=10))
        server = kube.server_version()
        say(OK, "cluster", f"reachable, Kubernetes {server}")
    except Exception as exc:
        say(FAIL, "cluster", f"not reachable: {_short(exc)}")
        return _verdict(results, out)
    # Outside the tested releases is a warning, never a failure: the operator runs there too.
    said = versions.kubernetes(server)
    say(OK if said.tested else WARN, "kubernetes version", said.message)
    try:
        info = kube.configmap_data(settings.tekton_namespace, tekton.PIPELINES_INFO_CONFIGMAP)
    except ApiError as exc:
        say(WARN, "tekton version", f"cannot read pipelines-info: {_short(exc)}")
    else:
        said = versions.tekton((info or {}).get("version"))
        say(OK if said.tested else WARN, "tekton version", said.message)

    for crd in ("pipelineruns.tekton.dev", f"{names.POLICY_PLURAL}.{names.POLICY_GROUP}"):
        try:
            served = kube.crd_served_versions(crd)
        except ApiError as exc:
            say(FAIL, f"crd {crd}", _short(exc))
            continue
        if served is None:
            say(FAIL, f"crd {crd}", "not installed")
        else:
            say(OK, f"crd {crd}", "served versions " + ", ".join(served))

    flags_at = f"{settings.tekton_namespace}/{tekton.FEATURE_FLAGS_CONFIGMAP}"
    try:
        flags = kube.configmap_data(settings.tekton_namespace, tekton.FEATURE_FLAGS_CONFIGMAP)
    except ApiError as exc:
        say(FAIL, "tekton feature-flags", f"{flags_at}: {_short(exc)}")
    else:
        if flags is None:
            say(FAIL, "tekton feature-flags", f"{flags_at}: 404 Not Found")
        elif tekton.assistant_enabled(flags):
            level = WARN if settings.ignore_tekton_assistant else FAIL
            say(
                level,
                "tekton affinity assistant",
                f"on (coschedule={flags.get('coschedule', '(default)')}); set "
                f"coschedule: disabled in {flags_at}",
            )
        else:
            say(OK, "tekton affinity assistant", "off (coschedule: disabled)")

    for need in access.REQUIRED:
        resource, _, sub = need.resource.partition("/")
        namespace = {
            "tekton": settings.tekton_namespace,
            "own": settings.leader_election_namespace or default_namespace(),
        }.get(need.scope)
        for verb in need.verbs:
            try:
                allowed = kube.can_i(need.group, resource, verb, namespace, sub)
            except ApiError as exc:
                say(WARN, f"rbac {verb} {need.resource}", f"cannot ask: {_short(exc)}")
                continue
            if not allowed:
                say(
                    FAIL,
                    f"rbac {verb} {need.group or 'core'}/{need.resource}",
                    f"denied ({need.why})",
                )
    if not any(r[1].startswith("rbac") for r in results):
        say(OK, "rbac", "every permission the operator needs is granted")
    return _verdict(results, out)


def _short(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return f"{exc.status} {exc.reason}"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def _verdict(results: list[tuple[str, str, str]], out: Callable[[str], None]) -> int:
    for level, what, detail in results:
        out(f"[{level:>4}] {what}: {detail}")
    failed = sum(1 for r in results if r[0] == FAIL)
    out("verdict: ready" if not failed else f"verdict: NOT READY ({failed} problem(s))")
    sys.stdout.flush()
    return 0 if not failed else 1
