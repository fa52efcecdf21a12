"""A glance at a raw watch event: never "no" for one of ours, "no" for most others."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.core.basics import names
from controller.core.replica import glance
from tests import factories

ENABLED = {"team-a"}
MARK = glance.marker(names.LABEL_ANCHORED)


def line(obj: dict[str, Any], kind: str = "MODIFIED", sort_keys: bool = False) -> bytes:
    """As the API server writes it: compact; built-in kinds in field order, custom resources
    with sorted keys (labels, annotations and ownerReferences before the namespace)."""
    body = json.dumps(obj, separators=(",", ":"), sort_keys=sort_keys)
    return f'{{"type":"{kind}","object":{body}}}'.encode()  # the event itself: a Go struct


def concerns(raw: bytes, held: set[str] | None = None) -> bool:
    return glance.may_concern(glance.glance(raw, (MARK,)), ENABLED.__contains__,
                              (held or set()).__contains__)


def tricky(namespace: str, uid: str) -> dict[str, Any]:
    """A run whose labels, annotations and owner name other namespaces and uids."""
    run = factories.pipelinerun(namespace=namespace, uid=uid, annotations={
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
            {"metadata": {"namespace": "team-a", "uid": "ours"}}),
        "namespace": "elsewhere"})
    run["metadata"]["labels"] = {"namespace": "not-ours-either"}
    run["metadata"]["ownerReferences"] = [{"kind": "Thing", "name": "t", "uid": "owner-uid"}]
    run["metadata"]["resourceVersion"] = "4711"
    return run


@pytest.mark.parametrize("sort_keys", [False, True])
def test_an_event_of_an_enabled_namespace_is_always_decoded(sort_keys: bool) -> None:
    assert concerns(line(tricky("team-a", "u1"), sort_keys=sort_keys))
    assert concerns(line(factories.taskrun_pod(namespace="team-a"), sort_keys=sort_keys))


@pytest.mark.parametrize("sort_keys", [False, True])
def test_an_event_of_a_namespace_that_did_not_opt_in_is_dropped_undecoded(sort_keys: bool
                                                                          ) -> None:
    assert not concerns(line(tricky("team-b", "u1"), sort_keys=sort_keys))
    assert not concerns(line(factories.taskrun_pod(namespace="team-b", run_uid="u2"),
                             sort_keys=sort_keys))


def test_an_escaped_namespace_inside_an_annotation_does_not_pass_for_the_object_s() -> None:
    """The last-applied annotation above names team-a, inside a JSON string: not a field."""
    seen = glance.glance(line(tricky("team-b", "u1"), sort_keys=True))
    assert seen.namespaces == {"team-b", "elsewhere", "not-ours-either"}
    assert "ours" not in seen.uids


def test_a_run_or_pod_held_here_is_decoded_in_any_namespace() -> None:
    run = tricky("team-b", "held-uid")
    assert concerns(line(run, sort_keys=True), held={"held-uid"})
    pod = factories.taskrun_pod(namespace="team-b", run_uid="held-uid")
    assert concerns(line(pod), held={"held-uid"})  # by its run's uid label


def test_a_marked_run_is_decoded_in_any_namespace() -> None:
    run = tricky("team-b", "u1")
    run["metadata"]["labels"][names.LABEL_ANCHORED] = "u1"
    assert concerns(line(run, sort_keys=True))


@pytest.mark.parametrize("kind", ["BOOKMARK", "ERROR"])
def test_bookmarks_and_errors_are_always_decoded(kind: str) -> None:
    assert concerns(line({"metadata": {"resourceVersion": "9"}}, kind=kind))


@pytest.mark.parametrize("sort_keys", [False, True])
def test_the_version_to_resume_from_is_the_object_s_own(sort_keys: bool) -> None:
    run = tricky("team-b", "u1")
    run["status"]["childReferences"] = [{"name": "x", "resourceVersion": "99999"}]
    assert glance.glance(line(run, sort_keys=sort_keys)).version == "4711"


@pytest.mark.parametrize("sort_keys", [False, True])
def test_only_the_object_s_metadata_is_read_not_its_spec_or_status(sort_keys: bool) -> None:
    """An enabled namespace named in the spec or the status of a run of another namespace (a
    parameter, a child's reference) does not make it ours; a label called `spec` does not end
    the metadata early."""
    run = tricky("team-b", "u1")
    run["metadata"]["labels"]["spec"] = "x"
    run["spec"]["params"] = [{"name": "target", "value": {"namespace": "team-a"}}]
    run["status"]["childReferences"] = [{"namespace": "team-a", "uid": "held-uid"}]
    assert not concerns(line(run, sort_keys=sort_keys), held={"held-uid"})
    run["metadata"]["labels"][names.LABEL_ANCHORED] = "u1"
    assert concerns(line(run, sort_keys=sort_keys))
