"""The balloon's decision as a plan: deterministic, and it converges. Applying what it decides
to a world that changes nothing else, and deciding again, asks for nothing more."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.model.tekton import PipelineRun
from controller.core.placement import reconcile
from controller.core.placement.reconcile import Verb
from controller.settings import Settings
from tests import factories

POLICY = Settings().default_policy()
CLAIMS = ["source", "cache", "results"]


@st.composite
def runs(draw: st.DrawFn) -> dict[str, Any]:
    claims = draw(st.lists(st.sampled_from(CLAIMS), unique=True, max_size=3))
    body = factories.pipelinerun(
        workspaces=[{"name": f"w-{c}", "persistentVolumeClaim": {"claimName": c}}
                    for c in claims],
        succeeded=draw(st.sampled_from(["Unknown", "True", "False", None])),
        spec_status=draw(st.sampled_from([None, "PipelineRunPending"])),
        annotations=draw(st.sampled_from([{}, {"tekton-coscheduler.dev/coschedule": "false"}])),
        pod_template=draw(st.sampled_from([None, {"nodeSelector": {"pool": "ci"}},
                                           {"tolerations": [{"key": "ci", "operator": "Exists"}]}])),
    )
    return body


def claim(name: str, modes: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a"},
            "spec": {"accessModes": modes}}


@st.composite
def observations(draw: st.DrawFn) -> reconcile.Observed:
    room = draw(st.booleans())
    return reconcile.Observed(
        run=PipelineRun.from_body(draw(runs())),
        namespace_enabled=draw(st.booleans()),
        policy=POLICY,
        tekton_default_template=draw(st.sampled_from([{}, {"nodeSelector": {"zone": "a"}}])),
        pvcs=[claim(c, draw(st.sampled_from([["ReadWriteOnce"], ["ReadWriteMany"],
                                             ["ReadWriteOncePod"]])))
              for c in CLAIMS],
        balloon=None,
        room=room,
        room_node=draw(st.sampled_from([None, "n1"])) if room else None,
        resolving=draw(st.sampled_from([None, "its pipeline"])),
    )


def applied(obs: reconcile.Observed, decision: reconcile.Decision) -> reconcile.Observed:
    """The world after the decision's act, as the next observation would read it."""
    if decision.verb in (Verb.CREATE, Verb.UPDATE):
        assert decision.manifest is not None
        return reconcile.Observed(**{**obs.__dict__, "balloon": copy.deepcopy(decision.manifest)})
    if decision.verb is Verb.DELETE:
        return reconcile.Observed(**{**obs.__dict__, "balloon": None})
    return obs


@settings(max_examples=300, deadline=None)
@given(observations(), st.sampled_from([None, "n1"]))
def test_the_decision_is_deterministic_and_applied_it_asks_for_nothing_more(
        obs: reconcile.Observed, bound: str | None) -> None:
    first = reconcile.decide(obs)
    assert reconcile.decide(copy.deepcopy(obs)) == first
    world = obs
    for _ in range(3):  # make, then (bound or not) any re-plan; then nothing
        decision = reconcile.decide(world)
        if decision.verb not in (Verb.CREATE, Verb.UPDATE, Verb.DELETE):
            break
        world = applied(world, decision)
        if world.balloon is not None:
            world = reconcile.Observed(**{**world.__dict__, "balloon_pod_node": bound})
    else:
        raise AssertionError(f"still acting after three rounds: {decision}")
    assert reconcile.decide(world).verb in (Verb.NONE, Verb.KEEP)
