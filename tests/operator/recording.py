"""The writes and Events of a tests/operator scenario, recorded key by key.

The scenarios hand the operator in-memory stand-ins for its API client and notifier (MemoryKube
in test_runs.py, and smaller fakes beside the tests that need only a few calls). Every class of
the tests that defines a write of tests/apisurface.py (or a notifier's `tell`) is recorded:
each call of such a method that comes from controller/ code becomes one record, in the order
the calls were made. Calls the tests make themselves (to set a scene) are not recorded.

A record is what the API server would be asked: the verb, the kind, the object's namespace and
name, and the body, normalised (timestamps, resourceVersions and random UIDs masked), plus the
error the stand-in raised, if any. Its key is the subject whose work the write is:

    PipelineRun <namespace>/<name>   a run's balloon, reservation pods, gates, marks, Events
    Namespace <namespace>            the namespace's PodDisruptionBudget
    CoschedulingPolicy <ns>/<name>   a policy's status and Events
    -                                the rest (bindings, the Lease, Tekton's feature flags)

A run is named by its PipelineRun. A write that names only the run's UID (a balloon's name, a
TaskRun's mark) is keyed through the runs the scenario made (tests/factories.py) and the runs
other writes of the scenario name: keys are given once the scenario has ended, so that they do
not depend on which write came first.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import controller
from controller.core.basics import names
from controller.core.model import tekton
from controller.core.placement import balloon
from controller.kube.admission_policies import AdmissionPolicies
from controller.kube.client import Kube, delete_options
from controller.operator.capacity import Capacity
from controller.operator.executor import Notifier
from controller.operator.marking import Gates, Marks
from controller.operator.observe import Observer
from tests import apisurface, factories

CONTROLLER = str(Path(controller.__file__).parent) + "/"
RECORDED = frozenset(apisurface.WRITES) | {"tell"}
# The signatures the operator calls by: each stand-in's own may differ (defaults, names).
SIGNATURES = {
    name: inspect.signature(getattr(Kube, name, None) or getattr(AdmissionPolicies, name))
    for name in apisurface.WRITES
} | {"tell": inspect.signature(Notifier.tell)}

PLURALS = {"pipelineruns": tekton.PIPELINE_RUN_KIND, "taskruns": "TaskRun"}
VOLATILE_KEYS = frozenset({"resourceVersion", "creationTimestamp", "managedFields",
                           "firstTimestamp", "lastTimestamp", "eventTime"})
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
# What uuid.uuid4() makes: tests/factories.py gives each TaskRun pod random UIDs. The runs'
# own UIDs are fixed strings (factories.RUN_UID among them) and stay as they are.
RANDOM_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
STABLE_UIDS = frozenset({factories.RUN_UID})
# How long something has waited, in an Event's words ("made no pod in 61s"): measured with the
# wall clock from timestamps the scenarios set relative to now (test_unplaced.py), so a second
# may tick over between the two on a busy machine.
DURATION = re.compile(r"\b\d+(\.\d+)?s\b")


def normalised(value: Any) -> Any:
    """The body as JSON would carry it, volatile values masked."""
    if isinstance(value, Mapping):
        return {str(k): ("<masked>" if k in VOLATILE_KEYS else normalised(v))
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalised(v) for v in value]
    if isinstance(value, str):
        masked = TIMESTAMP.sub("<time>", value)
        return RANDOM_UID.sub(
            lambda m: m.group(0) if m.group(0) in STABLE_UIDS else "<uuid>", masked)
    if value is None or isinstance(value, bool | int | float):
        return value
    return normalised(str(value))


@dataclass
class Write:
    """One call as the API server would see it, and what names the run it is for."""

    verb: str
    kind: str
    namespace: str
    name: str
    body: Any
    run_name: str = ""  # the PipelineRun's, when the call says it
    run_uid: str = ""
    raised: str = ""

    def record(self, key: str) -> dict[str, Any]:
        body = normalised(self.body)
        if self.verb == "event":
            body["message"] = DURATION.sub("<n>s", body["message"])
        out = {"key": key, "verb": self.verb, "kind": self.kind, "namespace": self.namespace,
               "name": self.name, "body": body}
        if self.raised:
            out["raised"] = self.raised
        return out


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _labelled(write: Write, obj: Mapping[str, Any]) -> Write:
    """The run an object we make names in its labels (balloon, reservation pod)."""
    labels = _meta(obj).get("labels") or {}
    write.run_name = str(labels.get(names.LABEL_RUN) or labels.get(tekton.LABEL_PIPELINE_RUN)
                         or "")
    write.run_uid = str(labels.get(names.LABEL_RUN_UID)
                        or labels.get(tekton.LABEL_PIPELINE_RUN_UID) or "")
    return write


def _object(verb: str, kind: str, obj: Mapping[str, Any], body: Any = None) -> Write:
    meta = _meta(obj)
    return _labelled(Write(verb, kind, str(meta.get("namespace") or ""),
                           str(meta.get("name") or ""), obj if body is None else body), obj)


def _event(involved: Mapping[str, Any], reason: str, message: str, warning: bool) -> Write:
    meta = _meta(involved)
    kind = str(involved.get("kind") or "")
    write = Write("event", kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                  {"reason": reason, "message": message,
                   "type": "Warning" if warning else "Normal"})
    if kind == tekton.PIPELINE_RUN_KIND:
        write.run_name, write.run_uid = write.name, str(meta.get("uid") or "")
    return write


def describe(method: str, a: Mapping[str, Any]) -> Write:
    """The write a call of `method` with these (bound) arguments sends."""
    verb, kind = apisurface.WRITES.get(method, ("event", ""))
    if method in ("create_statefulset", "create_pod", "create_pdb"):
        return _object(verb, kind, a["manifest"])
    if method in ("create_lease", "replace_lease", "create_binding", "replace_binding"):
        return _object(verb, kind, a["body"])  # a binding's resourceVersion is volatile
    if method == "replace_balloon_template":
        manifest = a["manifest"]
        return _object(verb, kind, manifest, {"spec": {"template": manifest["spec"]["template"]}})
    if method == "annotate_statefulset":
        body = {"metadata": {"annotations": dict(a["annotations"])}}
        return Write(verb, kind, a["namespace"], a["name"], body)
    if method == "delete_statefulset":
        return Write(verb, kind, a["namespace"], a["name"],
                     delete_options(a["uid"], propagationPolicy="Background"))
    if method == "delete_pod":
        return Write(verb, kind, a["namespace"], a["name"],
                     delete_options(a["uid"], gracePeriodSeconds=a["grace"]))
    if method == "release_pod_gate":
        return Write(verb, kind, a["namespace"], a["name"],
                     {**a["patch"], "metadata": {"uid": a["uid"]}})
    if method == "delete_pdb":
        return Write(verb, kind, a["namespace"], a["name"], delete_options(a["uid"]))
    if method == "patch_tekton":
        kind = PLURALS.get(a["plural"], a["plural"])
        write = Write(verb, kind, a["namespace"], a["name"], dict(a["patch"]))
        anchored = (_meta(a["patch"]).get("labels") or {}).get(names.LABEL_ANCHORED)
        write.run_uid = str(anchored or "")  # the mark's value is the run's UID
        if kind == tekton.PIPELINE_RUN_KIND:
            write.run_name = a["name"]
        return write
    if method == "patch_policy_status":
        return Write(verb, kind, a["namespace"], a["name"], {"status": dict(a["status"])})
    if method == "delete_binding":
        return Write(verb, kind, "", a["name"], None)
    if method == "post_event":
        return _event(a["involved"], a["reason"], a["message"], a["warning"])
    if method == "tell":
        notice = a["notice"]
        return _event(a["involved"], notice.reason, notice.message, notice.warning)
    raise AssertionError(f"{method}: a write tests/operator/recording.py cannot describe")


@dataclass
class Recorder:
    """The writes of one scenario, in the order they were made (from any thread)."""

    writes: list[Write] = field(default_factory=list)
    # Runs by UID, and TaskRun pods by (namespace, name): what tests/factories.py made.
    runs: dict[str, tuple[str, str]] = field(default_factory=dict)
    pods: dict[tuple[str, str], str] = field(default_factory=dict)
    # Writes asked for while a run was being observed (operator/observe.py): there must be none.
    while_observing: list[str] = field(default_factory=list)
    _observing: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def learn_run(self, namespace: str, name: str, uid: str | None) -> None:
        if uid:
            with self._lock:
                self.runs.setdefault(uid, (namespace, name))

    def note(self, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Write:
        bound = SIGNATURES[method].bind(None, *args, **kwargs)
        bound.apply_defaults()
        write = describe(method, bound.arguments)
        with self._lock:
            self.writes.append(write)
        return write

    def wrap(self, method: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """`call`, recorded when controller/ code calls it."""

        def recorded(*args: Any, **kwargs: Any) -> Any:
            if not sys._getframe(1).f_code.co_filename.startswith(CONTROLLER):
                return call(*args, **kwargs)
            write = self.note(method, args, kwargs)
            if getattr(self._observing, "depth", 0):
                with self._lock:
                    self.while_observing.append(f"{write.verb} {write.kind} {write.name}")
            try:
                return call(*args, **kwargs)
            except Exception as exc:  # a write refused is still a write asked for
                write.raised = f"{type(exc).__name__} {getattr(exc, 'status', '') or ''}".strip()
                raise

        recorded.__recorded__ = True  # type: ignore[attr-defined]
        return recorded

    # -- keys --------------------------------------------------------------------------------

    def observing(self, call: Callable[..., Any]) -> Callable[..., Any]:
        """`call`, during which this thread is observing a run."""

        def observe(*args: Any, **kwargs: Any) -> Any:
            self._observing.depth = getattr(self._observing, "depth", 0) + 1
            try:
                return call(*args, **kwargs)
            finally:
                self._observing.depth -= 1

        return observe

    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            writes = list(self.writes)
        runs = self._known_runs(writes)
        return [w.record(self._key(w, runs)) for w in writes]

    def _known_runs(self, writes: list[Write]) -> dict[str, tuple[str, str]]:
        """Run UID -> (namespace, name): the scenario's own runs first, then what the writes
        say (the smallest name where two say different things: no order counts)."""
        said: dict[str, set[tuple[str, str]]] = {}
        for w in writes:
            if w.run_uid and w.run_name:
                said.setdefault(w.run_uid, set()).add((w.namespace, w.run_name))
        known = {uid: min(both) for uid, both in said.items()}
        known.setdefault(factories.RUN_UID, ("team-a", "build-42"))  # the factories' default
        return known | self.runs

    def _key(self, w: Write, runs: Mapping[str, tuple[str, str]]) -> str:
        if w.kind == "PodDisruptionBudget":
            return f"Namespace {w.namespace}"
        if w.kind.startswith(names.POLICY_KIND):
            return f"{names.POLICY_KIND} {w.namespace}/{w.name}"
        if w.kind in ("Lease", "MutatingAdmissionPolicyBinding", "ConfigMap"):
            return "-"
        if w.run_name:
            return f"PipelineRun {w.namespace}/{w.run_name}"
        uid = w.run_uid or self._uid_in_name(w, runs)
        if uid in runs:
            namespace, name = runs[uid]
            return f"PipelineRun {namespace}/{name}"
        if uid:
            return f"PipelineRun {w.namespace}/uid={uid}"
        if (w.namespace, w.name) in self.pods:
            return f"PipelineRun {w.namespace}/{self.pods[(w.namespace, w.name)]}"
        # Nothing names a run: the object is its own key.
        return f"{w.kind} {w.namespace}/{w.name}"

    @staticmethod
    def _uid_in_name(w: Write, runs: Mapping[str, tuple[str, str]]) -> str:
        """The run whose balloon (or the balloon's pod, or a reservation pod) this is."""
        for uid in sorted(runs):
            made = balloon.balloon_name(uid)
            if w.name == made or w.name.startswith(f"{made}-"):
                return uid
        return ""


# -- the stand-ins -------------------------------------------------------------------------------


def stand_ins() -> Iterator[type]:
    """The classes of the tests that stand in for a client or a notifier."""
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("tests.") or module is None:
            continue
        for value in list(vars(module).values()):
            if (isinstance(value, type) and value.__module__ == module_name
                    and RECORDED & set(vars(value))):
                yield value


def install(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write method of a stand-in, as any instance gives it (one assigned on the instance
    too), recorded for the length of one test."""
    for cls in set(stand_ins()):
        original = cls.__getattribute__

        def getattribute(self: Any, name: str, _original: Any = original) -> Any:
            value = _original(self, name)
            if name in RECORDED and callable(value) and not hasattr(value, "__recorded__"):
                return recorder.wrap(name, value)
            return value

        monkeypatch.setattr(cls, "__getattribute__", getattribute)

    # A test may stand in for the real notifier's `tell` alone (test_runs.py counts what is
    # said, before the notifier's once-per-key memory): that tell is recorded as the fakes' are.
    def notifier_getattribute(self: Any, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if name == "tell" and "tell" in vars(self) and not hasattr(value, "__recorded__"):
            return recorder.wrap(name, value)
        return value

    monkeypatch.setattr(Notifier, "__getattribute__", notifier_getattribute)
    # A run's snapshot (its observation, its fresh read, what its reservation step, its mark
    # and its held pods read) reads and never writes.
    for cls, name in ((Observer, "observe"), (Observer, "fresh"), (Capacity, "view"),
                      (Marks, "marking"), (Gates, "held")):
        monkeypatch.setattr(cls, name, recorder.observing(getattr(cls, name)))
    made_run, made_pod = factories.pipelinerun, factories.taskrun_pod

    def pipelinerun(*args: Any, **kwargs: Any) -> dict[str, Any]:
        body = made_run(*args, **kwargs)
        meta = body["metadata"]
        recorder.learn_run(meta["namespace"], meta["name"], meta.get("uid"))
        return body

    def taskrun_pod(*args: Any, **kwargs: Any) -> dict[str, Any]:
        pod = made_pod(*args, **kwargs)
        meta, labels = pod["metadata"], pod["metadata"]["labels"]
        run = labels[tekton.LABEL_PIPELINE_RUN]
        recorder.learn_run(meta["namespace"], run, labels.get(tekton.LABEL_PIPELINE_RUN_UID))
        with recorder._lock:
            recorder.pods[(meta["namespace"], meta["name"])] = run
        return pod

    monkeypatch.setattr(factories, "pipelinerun", pipelinerun)
    monkeypatch.setattr(factories, "taskrun_pod", taskrun_pod)


# -- the record on disk ------------------------------------------------------------------------


def by_key(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    keyed: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        keyed.setdefault(r["key"], []).append(r)
    return keyed


def difference(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> str:
    """'' when each key's writes are the recorded ones in the recorded order (the order between
    keys may differ); else a diff per key that differs."""
    import difflib

    want, got = by_key(expected), by_key(actual)
    out: list[str] = []
    for key in sorted(set(want) | set(got)):
        if want.get(key, []) == got.get(key, []):
            continue
        lines = difflib.unified_diff(
            _lines(want.get(key, [])), _lines(got.get(key, [])),
            "recorded", "now", n=6, lineterm="")
        out.append(f"--- key {key}: {len(want.get(key, []))} writes recorded, "
                   f"{len(got.get(key, []))} now\n" + "\n".join(lines))
    return "\n".join(out)


def _lines(records: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for i, r in enumerate(records):
        shown = {k: v for k, v in r.items() if k != "key"}
        lines.append(f"#{i} {r['verb']} {r['kind']} {r['namespace']}/{r['name']}")
        lines.extend(json.dumps(shown, indent=1, sort_keys=True).splitlines())
    return lines


def load(path: Path) -> dict[str, list[dict[str, Any]]]:
    if not path.exists():
        return {}
    loaded: dict[str, list[dict[str, Any]]] = json.loads(path.read_text())
    return loaded


def save(path: Path, tests: Mapping[str, list[dict[str, Any]]]) -> None:
    """Each scenario's records grouped by key, each key's in the order they were made. How two
    keys' writes interleave is not kept: it is not held to, and it differs from one process to
    the next where the operator goes over a set of runs (PodIndex._waiters, the runs waiting
    for a node, in WaitingPods.check: set order follows PYTHONHASHSEED)."""
    grouped = {test: sorted(records, key=lambda r: str(r["key"]))  # stable: order in a key kept
               for test, records in tests.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(grouped, indent=1, sort_keys=True) + "\n")
