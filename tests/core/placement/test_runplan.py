"""One look at a run: admitted before it is observed, planned after, asking for a read first
where a decision could not be trusted without it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.core.basics import names
from controller.core.basics.notices import Notice
from controller.core.model.tekton import PipelineRun
from controller.core.placement import runplan
from controller.core.placement.reconcile import Verb
from controller.core.placement.runplan import Ask
from tests import factories
from tests.core.placement.test_reconcile import current_balloon, observe


def run(**kwargs: Any) -> PipelineRun:
    return PipelineRun.from_body(factories.pipelinerun(**kwargs))


def test_a_live_run_of_ours_is_kept_live_and_looked_at_further() -> None:
    admitted = runplan.admit(run(), serves=True, may_have_balloon=True, has_room=False)
    assert (admitted.live, admitted.forget_settled, admitted.forget_ended) == (True, False, False)
    assert admitted.done is None


def test_a_run_not_ours_is_dropped_at_once_and_costs_no_further_read() -> None:
    admitted = runplan.admit(run(), serves=False, may_have_balloon=True, has_room=False)
    assert not admitted.live and admitted.forget_settled and not admitted.forget_ended
    assert admitted.done is not None and admitted.done.why == "namespace not enabled"


def test_a_finished_run_forgets_its_work_and_stops_once_its_balloon_is_known_gone() -> None:
    ended = run(succeeded="True")
    admitted = runplan.admit(ended, serves=True, may_have_balloon=True, has_room=False)
    assert not admitted.live and admitted.forget_ended and admitted.done is None  # its balloon goes
    gone = runplan.admit(ended, serves=True, may_have_balloon=False, has_room=True)
    assert gone.done is not None and gone.release_room  # it ended while its scout looked


def test_an_invalid_run_is_done_with() -> None:
    body = factories.pipelinerun()
    del body["metadata"]["uid"]
    admitted = runplan.admit(PipelineRun.from_body(body), False, True, False)
    assert admitted.done is not None and admitted.done.verb is Verb.NONE


def test_a_statefulset_of_the_balloon_s_name_and_another_run_is_not_ours() -> None:
    existing = current_balloon()
    assert not runplan.name_taken(run(), existing)
    existing["metadata"]["labels"][names.LABEL_RUN_UID] = "another"
    assert runplan.name_taken(run(), existing)
    assert not runplan.name_taken(run(), None)


def test_a_balloon_made_from_a_body_that_may_be_old_asks_for_the_run_first() -> None:
    observed = observe()
    assert runplan.plan(observed, newest=True).decision.verb is Verb.CREATE
    asked = runplan.plan(observed, newest=False)
    assert asked.ask is Ask.RUN
    planned = runplan.plan(observed, newest=False, asked=frozenset({Ask.RUN}))
    assert planned.ask is None and planned.decision.verb is Verb.CREATE and planned.keeps


def test_a_template_replaced_asks_first_where_the_balloon_pod_is_bound() -> None:
    existing = current_balloon()
    existing["spec"]["template"]["spec"]["volumes"] = []  # it lacks the run's claim: UPDATE
    observed = observe(existing=existing)
    assert runplan.plan(observed, newest=True).ask is Ask.BALLOON_NODE
    bound = runplan.plan(replace(observed, balloon_pod_node="n1"), True, frozenset({Ask.BALLOON_NODE}))
    assert bound.decision.verb is Verb.KEEP and bound.ask is None  # placed: never moved
    unbound = runplan.plan(observed, True, frozenset({Ask.BALLOON_NODE}))
    assert unbound.decision.verb is Verb.UPDATE and unbound.ask is None


@pytest.mark.parametrize("finished", [False, True])
def test_what_the_observation_found_is_said_before_the_decision_s_own(finished: bool) -> None:
    said = Notice("PeakNotEstimated", "the pipeline cannot be estimated")
    observed = replace(observe(factories.pipelinerun(succeeded="True" if finished else None)),
                       notices=(said,))
    planned = runplan.plan(observed, newest=True)
    assert planned.decision.notices[:1] == (said,)
    assert planned.keeps is not finished  # a run that ended is neither marked nor tended
