"""`tekton-coscheduler check`: are the settings and the cluster ready for the operator?"""

from __future__ import annotations

import sys
from collections.abc import Callable

import kubernetes
from kubernetes.client.exceptions import ApiException

from controller.kube.client import access
from controller.core import names, tekton
from controller.kube.client import Kube, load_client_config
from controller.kube.leadership import default_namespace
from controller.settings import Settings

OK, WARN, FAIL = "ok", "warn", "FAIL"


def check(settings: Settings, out: Callable[[str], None] = print) -> int:
    results: list[tuple[str, str, str]] = [(OK, "settings", "valid")]

    def say(level: str, what: str, detail: str) -> None:
        results.append((level, what, detail))

    try:
        kube = Kube(load_client_config(), timeout=10)
        version = kubernetes.client.VersionApi(kube.api).get_code(_request_timeout=10)
        say(OK, "cluster", f"reachable, Kubernetes {version.git_version}")
    except Exception as exc:
        say(FAIL, "cluster", f"not reachable: {_short(exc)}")
        return _verdict(results, out)

    ext = kubernetes.client.ApiextensionsV1Api(kube.api)
    for crd, needed in (
        ("pipelineruns.tekton.dev", True),
        (f"{names.POLICY_PLURAL}.{names.POLICY_GROUP}", True),
    ):
        try:
            obj = ext.read_custom_resource_definition(crd, _request_timeout=10)
            served = [v.name for v in obj.spec.versions if v.served]
            say(OK, f"crd {crd}", "served versions " + ", ".join(served))
        except ApiException as exc:
            say(
                FAIL if needed else WARN,
                f"crd {crd}",
                "not installed" if exc.status == 404 else _short(exc),
            )

    try:
        cm = kube.core.read_namespaced_config_map(
            tekton.FEATURE_FLAGS_CONFIGMAP, settings.tekton_namespace, _request_timeout=10
        )
        if tekton.assistant_enabled(cm.data):
            level = WARN if settings.ignore_tekton_assistant else FAIL
            say(
                level,
                "tekton affinity assistant",
                f"on (coschedule={(cm.data or {}).get('coschedule', '(default)')}); set "
                f"coschedule: disabled in {settings.tekton_namespace}/feature-flags",
            )
        else:
            say(OK, "tekton affinity assistant", "off (coschedule: disabled)")
    except ApiException as exc:
        say(
            FAIL,
            "tekton feature-flags",
            f"{settings.tekton_namespace}/feature-flags: {_short(exc)}",
        )

    authz = kubernetes.client.AuthorizationV1Api(kube.api)
    for need in access.REQUIRED:
        resource, _, sub = need.resource.partition("/")
        for verb in need.verbs:
            namespace = {
                "tekton": settings.tekton_namespace,
                "own": settings.leader_election_namespace or default_namespace(),
            }.get(need.scope)
            review = kubernetes.client.V1SelfSubjectAccessReview(
                spec=kubernetes.client.V1SelfSubjectAccessReviewSpec(
                    resource_attributes=kubernetes.client.V1ResourceAttributes(
                        group=need.group,
                        resource=resource,
                        subresource=sub or None,
                        verb=verb,
                        namespace=namespace,
                    )
                )
            )
            try:
                answer = authz.create_self_subject_access_review(review, _request_timeout=10)
                allowed = bool(answer.status and answer.status.allowed)
            except ApiException as exc:
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
    if isinstance(exc, ApiException):
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
