"""Warm anchors: the run's images, where nodes hold them, and the preference that follows."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from controller.core.model.tekton import PipelineRun
from controller.core.placement import balloon, warm
from controller.settings import Settings
from tests import factories

GB = 10**9


@pytest.mark.parametrize(("ref", "full"), [
    ("busybox", "docker.io/library/busybox:latest"),
    ("busybox:1.36", "docker.io/library/busybox:1.36"),
    ("maven/maven:3", "docker.io/maven/maven:3"),
    ("index.docker.io/library/golang:1.26", "docker.io/library/golang:1.26"),
    ("gcr.io/kaniko-project/executor:v1", "gcr.io/kaniko-project/executor:v1"),
    ("localhost:5000/builder", "localhost:5000/builder:latest"),
    ("10.87.0.1:5000/a/b@sha256:abc", "10.87.0.1:5000/a/b@sha256:abc"),
    ("quay.io/buildah/stable", "quay.io/buildah/stable:latest"),
])
def test_a_reference_reads_as_the_kubelet_reports_it(ref: str, full: str) -> None:
    assert warm.normalize(ref) == full


def task(image: str | None = None, *, sidecar: str | None = None, template: str | None = None,
         ) -> dict[str, Any]:
    spec: dict[str, Any] = {"steps": [{"name": "s", **({"image": image} if image else {}),
                                       "script": "true"}]}
    if sidecar:
        spec["sidecars"] = [{"name": "side", "image": sidecar}]
    if template:
        spec["stepTemplate"] = {"image": template}
    return spec


def test_a_run_pulls_its_steps_and_sidecars_images_inline_named_and_finally() -> None:
    tasks = {"compile": task("golang:1.26")}
    pipeline = {
        "tasks": [{"name": "a", "taskSpec": task("maven:3", sidecar="docker:dind")},
                  {"name": "b", "taskRef": {"name": "compile"}},
                  {"name": "c", "taskSpec": task(template="node:22")},
                  {"name": "d", "taskSpec": task("$(params.builder)")},
                  {"name": "e", "taskRef": {"name": "missing"}}],
        "finally": [{"name": "f", "taskSpec": task("alpine")}],
    }
    images = warm.run_images(pipeline, lambda ref: tasks.get(str(ref.get("name"))))
    assert images == {"docker.io/library/maven:3", "docker.io/library/docker:dind",
                      "docker.io/library/golang:1.26", "docker.io/library/node:22",
                      "docker.io/library/alpine:latest"}


def node(name: str, *images: tuple[str, int]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"images": [
        {"names": [f"{ref}@sha256:{i:064x}", ref], "sizeBytes": size}
        for i, (ref, size) in enumerate(images)]}}


def holders(*nodes: dict[str, Any]) -> dict[str, dict[str, int]]:
    index: dict[str, dict[str, int]] = {}
    for n in nodes:
        for image, size in warm.node_images(n).items():
            index.setdefault(image, {})[n["metadata"]["name"]] = size
    return index


def named(terms: list[dict[str, Any]]) -> dict[str, int]:
    """Each node a term names (by hostname label or by name) -> the term's weight."""
    return {value: t["weight"] for t in terms
            for sel in [*t["preference"].get("matchExpressions", []),
                        *t["preference"].get("matchFields", [])] for value in sel["values"]}


MAVEN, NODE = "docker.io/library/maven:3", "docker.io/library/node:22"


def test_the_nodes_holding_more_of_the_run_s_bytes_are_preferred_more() -> None:
    index = holders(node("all", (MAVEN, GB), (NODE, GB // 2)), node("some", (MAVEN, GB)),
                    node("few", (NODE, GB // 2)), node("none", ("docker.io/library/x:1", GB)))
    found = warm.warmth(frozenset({MAVEN, NODE}), index)
    assert found.total == 3 * GB // 2 and found.unsized == 0
    assert found.held == {"all": 3 * GB // 2, "some": GB, "few": GB // 2}
    weights = named(found.terms())
    assert weights == {"all": 50, "some": 35, "few": 20}
    assert weights["all"] > weights["some"] > weights["few"]


def test_nodes_holding_alike_share_one_term_by_their_hostname_label_else_one_each_by_name(
) -> None:
    """The API server takes one value only in a `metadata.name` field selector (422 "must be
    only one value when `operator` is 'In'"): nodes are grouped by the hostname label they
    report, and one without it gets a term of its own."""
    index = holders(*(node(f"n{i}", (MAVEN, GB)) for i in range(30)))
    labels = {f"n{i}": f"host-{i}" for i in range(29)}  # n29 reports no hostname label
    terms = warm.warmth(frozenset({MAVEN}), index, hostnames=labels).terms()
    assert [len(t["preference"].get("matchExpressions", [{}])[0].get("values", []))
            for t in terms] == [29, 0]
    assert terms[0]["preference"]["matchExpressions"][0]["key"] == "kubernetes.io/hostname"
    assert terms[1]["preference"]["matchFields"] == [
        {"key": "metadata.name", "operator": "In", "values": ["n29"]}]
    assert {t["weight"] for t in terms} == {warm.IMAGES_WEIGHT}


def test_tiny_images_are_not_worth_a_preference() -> None:
    small = holders(node("n0", (MAVEN, 5 * 2**20)))
    assert warm.warmth(frozenset({MAVEN}), small).terms() == []


def test_the_pipeline_s_last_node_weighs_more_than_any_image() -> None:
    found = warm.warmth(frozenset({MAVEN}), holders(node("images", (MAVEN, GB))),
                        cache_key="build", cache_node="cache")
    assert named(found.terms()) == {"cache": warm.CACHE_WEIGHT, "images": warm.IMAGES_WEIGHT}


def test_an_image_no_node_reports_is_unsized_and_held_nowhere() -> None:
    found = warm.warmth(frozenset({MAVEN, "docker.io/library/rare:1"}),
                        holders(node("a", (MAVEN, GB))))
    assert found.unsized == 1 and found.total == GB


def test_the_balloon_prefers_and_never_requires_the_warm_nodes() -> None:
    run = PipelineRun.from_body(factories.pipelinerun())
    found = warm.warmth(frozenset({MAVEN}), holders(node("a", (MAVEN, GB))), "fan-out-in", "b")
    sts = balloon.plan(run, Settings().default_policy(), run.claims(), warmth=found).manifest
    node_affinity = sts["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in node_affinity
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] == found.terms()
    kubernetes_validate.validate(sts, "1.36", strict=True)
    note = warm.noted(sts["metadata"]["annotations"][warm.ANNOTATION])
    assert note == warm.Noted({MAVEN: GB}, {"a": GB}, "fan-out-in", "b")


def test_the_policy_s_own_preferences_are_kept_beside_ours() -> None:
    run = PipelineRun.from_body(factories.pipelinerun())
    own = {"weight": 7, "preference": {"matchExpressions": [
        {"key": "disk", "operator": "In", "values": ["ssd"]}]}}
    pol = Settings().default_policy()
    pol = type(pol)(**{**pol.__dict__, "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [own]}}})
    found = warm.warmth(frozenset({MAVEN}), holders(node("a", (MAVEN, GB))))
    sts = balloon.plan(run, pol, run.claims(), warmth=found).manifest
    preferred = sts["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [own, *found.terms()]


def test_what_the_anchored_event_says() -> None:
    note = warm.noted(warm.warmth(frozenset({MAVEN, NODE}), holders(
        node("a", (MAVEN, 1_200_000_000), (NODE, 200_000_000)), node("b", (MAVEN, 1_200_000_000)),
    ), "build", "a").annotation())
    assert warm.said(note, "a", 1_400_000_000) == (
        "1.4 GB of the run's 1.4 GB of images already there; its pipeline's caches are warm "
        "there (its last run ran there)")
    assert warm.said(note, "c", 0) == (
        "none of the run's 1.4 GB of images reported there (most on a: 1.4 GB); its "
        "pipeline's last run was on a, which could not take it: its caches start cold")
    assert warm.said(warm.noted(None), "a", 0) == ""
    assert warm.noted("{not json") == warm.Noted()
    assert warm.noted('{"sizes": {"x": "big"}, "nodes": [1]}') == warm.Noted()
