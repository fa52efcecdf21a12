"""`check`: are the settings and the cluster ready for the operator? Each finding a line, then a
verdict; `-o json|yaml` prints them as a document (docs/reference/cli.md).

The permissions checked are the operator's ServiceAccount's (SubjectAccessReviews), not the
caller's: a person at a workstation may do much more, or much less, than the operator."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from controller.core import explain
from controller.core.basics import names
from controller.core.model import assistant, tekton, versions
from controller.faces import terminal
from controller.kube import access
from controller.kube.client import ApiError, Kube, api_message
from controller.kube.connection import connect
from controller.kube.inspection import Inspection
from controller.settings import ENV_PREFIX, Settings

# What the chart sets when the operator keeps its own webhook certificate (tls.mode controller).
TLS_SECRET_VARIABLE = f"{ENV_PREFIX}WEBHOOK_TLS_SECRET"

OK, WARN, FAIL = "ok", "warn", "FAIL"
KIND, VERSION = "CheckReport", 1
Say = Callable[[str, str, str], None]


def check(settings: Settings, *, kubeconfig: str | None = None, context: str | None = None,
          output: str = "text", operator_namespace: str | None = None,
          service_account: str | None = None, as_caller: bool = False,
          out: Callable[[str], Any] = print,
          err: Callable[[str], Any] = lambda s: print(s, file=sys.stderr)) -> int:
    results: list[tuple[str, str, str]] = [(OK, "settings", "valid")]

    def say(level: str, what: str, detail: str) -> None:
        results.append((level, what, detail))

    try:
        target = connect(kubeconfig, context)
        kube = Inspection(Kube(target.client, timeout=10))
        server = kube.server_version()
    except Exception as exc:  # whatever the user's configuration holds: said, never a traceback
        why = terminal.failure(exc) or f"{type(exc).__name__}: {exc}"
        say(FAIL, "cluster", f"not reachable: {why}")
        _verdict(results, output, out)
        err(f"error: {why}")
        return terminal.UNREACHABLE
    say(OK, "cluster", f"reachable, Kubernetes {server}")
    # Outside the tested releases is a warning, never a failure: the operator runs there too.
    said = versions.kubernetes(server)
    say(OK if said.tested else WARN, "kubernetes version", said.message)
    try:
        _tekton(settings, kube, say)
        ref = terminal.operator_ref(target, operator_namespace, service_account)
        _label(settings, kube, ref, say)
        _access(settings, kube, ref, as_caller, say)
    except Exception as exc:  # the API server gone meanwhile: said; anything else is a bug
        lost = terminal.failure(exc)
        if lost is None:
            raise
        say(FAIL, "cluster", f"lost: {lost}")
        _verdict(results, output, out)
        err(f"error: {lost}")
        return terminal.UNREACHABLE
    return _verdict(results, output, out)


def _tekton(settings: Settings, kube: Inspection, say: Say) -> None:
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
        return
    if flags is None:
        say(FAIL, "tekton feature-flags", f"{flags_at}: 404 Not Found")
        return
    _assistant(assistant.meaning(flags), say)


def _assistant(said: assistant.Meaning, say: Say) -> None:
    """Tekton's affinity assistant, in whichever mode, is no problem: opted-in namespaces are
    ours beside it, the others Tekton's. What the mode means is said; only a mode Tekton does
    not know is a warning (Tekton's controller refuses it)."""
    say(OK if said.known else WARN, "tekton affinity assistant", said.state)
    for what, detail in (("opted-in namespaces", said.opted_in),
                         ("other namespaces", said.others),
                         ("tekton's limit", said.limit),
                         ("old flag", said.old_flag)):
        if detail:
            say(OK, f"tekton assistant, {what}", detail)


def _label(settings: Settings, kube: Inspection, ref: terminal.OperatorRef, say: Say) -> None:
    """The label namespaces opt in with, as the operator is configured, and who carries it."""
    label = terminal.configured_label(settings, kube, ref)
    say(OK if label.known else WARN, "opt-in label", f"{label.selector} ({label.source})")
    try:
        opted = sorted(str((n.get("metadata") or {}).get("name"))
                       for n in kube.list_namespaces(label.selector))
    except ApiError as exc:
        say(WARN, "opted-in namespaces", f"cannot list namespaces: {_short(exc)}")
        return
    if opted:
        shown = ", ".join(opted[:10]) + (f" and {len(opted) - 10} more" if len(opted) > 10 else "")
        say(OK, "opted-in namespaces", f"{len(opted)}: {shown}")
    else:
        say(WARN, "opted-in namespaces",
            f"none yet: kubectl label namespace NAME {label.selector}")


def _access(settings: Settings, kube: Inspection, ref: terminal.OperatorRef, as_caller: bool,
            say: Say) -> None:
    """Each permission of the access list the chart grants (kube/access.py), asked of the API
    server for the operator's ServiceAccount; for the caller itself when asked to (--as-caller),
    when the caller is that ServiceAccount, or when the caller may not ask for another."""
    account = f"ServiceAccount {ref.namespace}/{ref.service_account}"
    ask: Callable[..., bool] = kube.can_i
    whose = "the caller" if as_caller else f"{account} (the caller)"
    if not as_caller and not ref.is_caller:
        try:
            found = kube.get_service_account(*ref.account)
        except ApiError:
            found = {}  # not readable by the caller: the reviews below still say what it may do
        if found is None:
            say(FAIL, "operator", f"{account} not found: is the operator installed there? "
                "(--operator-namespace, --service-account; --as-caller for an operator run "
                "with the caller's own credentials)")
            return
        ask, whose = (lambda *a: kube.may(ref.account, *a)), account
    denied = 0
    needs = access.REQUIRED
    if _manages_its_certificate(settings, kube, ref):
        needs += access.SELF_MANAGED_TLS
        say(OK, "tls", "the operator keeps its own webhook certificate (webhook.tls.mode "
            "controller): the access it needs for that is asked too")
    for need in needs:
        resource, _, sub = need.resource.partition("/")
        namespace = {
            "tekton": settings.tekton_namespace,
            "own": settings.leader_election_namespace or ref.namespace,
        }.get(need.scope)
        for verb in need.verbs:
            try:
                try:
                    allowed = ask(need.group, resource, verb, namespace, sub)
                except ApiError as exc:
                    if exc.status != 403 or whose != account:
                        raise
                    # The caller may not ask about another: its own access, labelled as such.
                    say(WARN, "rbac", f"the caller may not create SubjectAccessReviews "
                        f"({api_message(exc)}): what follows is the caller's own access "
                        f"(SelfSubjectAccessReview), not {account}'s")
                    ask, whose = kube.can_i, "the caller"
                    allowed = ask(need.group, resource, verb, namespace, sub)
            except ApiError as exc:
                say(WARN, f"rbac {verb} {need.resource}", f"cannot ask: {_short(exc)}")
                continue
            if not allowed:
                denied += 1
                say(FAIL, f"rbac {verb} {need.group or 'core'}/{need.resource}",
                    f"denied to {whose} ({need.why})")
    if not denied:
        say(OK, "rbac", f"every permission the operator needs is granted to {whose}")


def _manages_its_certificate(settings: Settings, kube: Inspection,
                             ref: terminal.OperatorRef) -> bool:
    """Whether the operator keeps its webhook's CA and certificate itself (the chart's
    `webhook.tls.mode: controller`): this command's own settings say so (in the operator's
    pod), or the operator's Deployment sets the Secret it keeps them in."""
    if settings.webhook_tls_secret:
        return True
    try:
        found = explain.operator_env(kube.list_deployments(ref.namespace), ref.service_account)
    except ApiError:
        return False  # not readable by the caller: the access every mode needs is still asked
    return found is not None and bool(found[1].get(TLS_SECRET_VARIABLE))


def _short(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return f"{exc.status} {exc.reason}"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def _verdict(results: list[tuple[str, str, str]], output: str, out: Callable[[str], Any]) -> int:
    failed = sum(1 for r in results if r[0] == FAIL)
    doc = {"kind": KIND, "version": VERSION, "ready": not failed, "problems": failed,
           "checks": [{"level": level.lower(), "name": what, "detail": detail}
                      for level, what, detail in results]}
    text = [f"[{level:>4}] {what}: {detail}" for level, what, detail in results]
    text.append("verdict: ready" if not failed else f"verdict: NOT READY ({failed} problem(s))")
    terminal.emit(doc, output, text, out)
    sys.stdout.flush()
    return terminal.OK if not failed else terminal.PROBLEMS
