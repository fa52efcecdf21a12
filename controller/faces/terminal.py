"""What `check` and `explain` share at a terminal: the exit codes, the output formats, what an
expected failure says, and which operator they look at (its ServiceAccount, and the label its
namespaces opt in with, as it is configured).

docs/reference/cli.md documents the exit codes and the documents `-o json|yaml` print.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from controller.core import explain
from controller.core.basics import names
from controller.kube import errors
from controller.kube.client import ApiError, api_message
from controller.kube.connection import ConfigError, Target, pod_namespace, pod_service_account
from controller.kube.inspection import Inspection
from controller.settings import ENV_PREFIX, Settings

# Exit codes (docs/reference/cli.md).
OK = 0  # check: ready; explain: the run has no problem known
PROBLEMS = 1  # check: not ready; explain: the run has problems, listed
USAGE = 2  # a command line or settings that cannot be used
UNREACHABLE = 3  # no cluster configured, the API server out of reach, or a read refused
NOT_FOUND = 4  # explain: no such PipelineRun

# The chart's defaults: its release name and namespace, and the ServiceAccount named after it.
DEFAULT_OPERATOR = "tekton-coscheduler"
LABEL_VARIABLES = (f"{ENV_PREFIX}NAMESPACE_LABEL", f"{ENV_PREFIX}NAMESPACE_LABEL_VALUE")


def emit(doc: Mapping[str, Any], fmt: str, text: Sequence[str],
         out: Callable[[str], Any] = print) -> None:
    """The document as JSON or YAML (keys in the order the document gives them), or the text."""
    if fmt == "json":
        out(json.dumps(doc, indent=2))
    elif fmt == "yaml":
        out(yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False).rstrip("\n"))
    else:
        for line in text:
            out(line)


def failure(exc: BaseException) -> str | None:
    """What an expected failure to reach or read the cluster says, in one line; None for an
    exception that is none of those (a bug: its traceback is worth more than a sentence)."""
    if isinstance(exc, ConfigError):
        return str(exc)
    if isinstance(exc, ApiError):
        status = int(exc.status or 0)
        if status == 0:
            return f"cannot reach the API server: {exc.reason}"
        word = {401: "unauthorized", 403: "forbidden"}.get(status, f"{status} {exc.reason}")
        return f"{word}: {api_message(exc)}"
    said = errors.classify(exc)
    if said.reason in ("connection", "timeout"):
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"cannot reach the API server: {text[:300]}"
    return None


@dataclass(frozen=True)
class OperatorRef:
    """The operator a command asks about: its namespace and its ServiceAccount."""

    namespace: str
    service_account: str
    # The caller is that ServiceAccount (a command run in the operator's pod, or one as its
    # ServiceAccount): its own access review is the operator's.
    is_caller: bool = False

    @property
    def account(self) -> tuple[str, str]:
        return self.namespace, self.service_account


def operator_ref(target: Target, namespace: str | None, service_account: str | None) -> OperatorRef:
    """The flags when given; in a pod, the pod's own ServiceAccount and namespace (POD_NAMESPACE,
    else the namespace the kubelet mounted); elsewhere the chart's defaults."""
    own = pod_service_account() if target.in_cluster else None
    in_pod = (os.environ.get("POD_NAMESPACE") or (own[0] if own else None) or pod_namespace()
              ) if target.in_cluster else None
    ns = namespace or in_pod or DEFAULT_OPERATOR
    sa = service_account or (own[1] if own else DEFAULT_OPERATOR)
    return OperatorRef(ns, sa, is_caller=own == (ns, sa))


@dataclass(frozen=True)
class Label:
    key: str
    value: str
    source: str  # where it was read, for a person
    known: bool  # False: the default assumed, the operator's own setting unread

    @property
    def selector(self) -> str:
        return f"{self.key}={self.value}"


def configured_label(settings: Settings, inspect: Inspection, ref: OperatorRef,
                     environ: Mapping[str, str] | None = None) -> Label:
    """The label namespaces opt in with, as the operator is configured: this command's own
    settings when its environment sets it (as in the operator's pod), else what the operator's
    Deployment sets, else the default, said to be assumed."""
    environ = os.environ if environ is None else environ
    if any(v in environ for v in LABEL_VARIABLES):
        return Label(settings.namespace_label, settings.namespace_label_value,
                     f"from this command's environment ({LABEL_VARIABLES[0]})", known=True)
    default = Label(names.NAMESPACE_LABEL, "true", "", known=False)
    try:
        found = explain.operator_env(inspect.list_deployments(ref.namespace), ref.service_account)
    except ApiError as exc:
        return _assumed(default, f"cannot read the Deployments of namespace {ref.namespace}: "
                                 f"{exc.status} {exc.reason}")
    if found is None:
        return _assumed(default, f"no Deployment in namespace {ref.namespace} runs as "
                                 f"ServiceAccount {ref.service_account}")
    name, env = found
    return Label(env.get(LABEL_VARIABLES[0], default.key), env.get(LABEL_VARIABLES[1], "true"),
                 f"from Deployment {ref.namespace}/{name}", known=True)


def _assumed(default: Label, why: str) -> Label:
    return Label(default.key, default.value,
                 f"the default, assumed: {why} (--operator-namespace, --service-account)",
                 known=False)
