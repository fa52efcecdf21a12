"""Warm caches: how a run's pipeline is known, and where its last run is remembered."""

from __future__ import annotations

from typing import Any

from controller.core.model.tekton import PipelineRun
from controller.core.placement import warmcache
from tests import factories


def run(spec: dict[str, Any], labels: dict[str, str] | None = None) -> PipelineRun:
    body = factories.pipelinerun()
    body["spec"] = spec
    body["metadata"]["labels"] = labels or {}
    return PipelineRun.from_body(body)


def test_a_run_s_pipeline_is_its_label_then_its_named_pipeline_then_its_source() -> None:
    named = {"pipelineRef": {"name": "build"}}
    assert warmcache.pipeline_key(run(named)) == "build"
    assert warmcache.pipeline_key(run(named, {"team/pipe": "web"}), "team/pipe") == "web"
    assert warmcache.pipeline_key(run(named, {"other": "web"}), "team/pipe") == "build"
    git = {"pipelineRef": {"resolver": "git", "params": [{"name": "url", "value": "repo"}]}}
    other = {"pipelineRef": {"resolver": "git", "params": [{"name": "url", "value": "fork"}]}}
    assert warmcache.pipeline_key(run(git)).startswith("git:")
    assert warmcache.pipeline_key(run(git)) != warmcache.pipeline_key(run(other))
    inline = {"pipelineSpec": {"tasks": [{"name": "a"}]}, "params": [{"name": "x", "value": 1}]}
    again = {"pipelineSpec": {"tasks": [{"name": "a"}]}, "params": [{"name": "x", "value": 2}]}
    assert warmcache.pipeline_key(run(inline)) == warmcache.pipeline_key(run(again))
    assert warmcache.pipeline_key(run(inline)).startswith("inline:")
    assert warmcache.pipeline_key(run({})) == ""


def test_the_last_node_is_remembered_and_read_back() -> None:
    patch = warmcache.remember(None, "build", "n1", "build-1", "2026-11-26T10:00:00Z")
    assert patch == {"warmNodes": {"build": {"node": "n1", "run": "build-1",
                                             "time": "2026-11-26T10:00:00Z"}}}
    assert warmcache.remembered(patch) == {"build": "n1"}
    assert warmcache.remembered({"warmNodes": {"x": "not an entry", "y": {}}}) == {}
    assert warmcache.remembered(None) == {}


def test_beyond_keep_pipelines_the_oldest_are_forgotten_in_the_same_patch() -> None:
    status = {"warmNodes": {f"p{i:03}": {"node": "n", "time": f"2026-11-26T10:{i // 60:02}:"
                                          f"{i % 60:02}Z"} for i in range(warmcache.KEEP)}}
    patch = warmcache.remember(status, "new", "n2", "r", "2026-11-26T11:00:00Z")["warmNodes"]
    assert patch["new"]["node"] == "n2"
    assert [k for k, v in patch.items() if v is None] == ["p000"]
    again = warmcache.remember(status, "p050", "n3", "r", "2026-11-26T11:00:00Z")["warmNodes"]
    assert again == {"p050": {"node": "n3", "run": "r", "time": "2026-11-26T11:00:00Z"}}
