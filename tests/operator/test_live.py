"""The live runs: what a newer event replaced is not dropped by an older one's end, and a
resync round goes over only what no event reconciled since its previous round."""

from __future__ import annotations

import time

from controller.operator.memory import LiveRuns, Memories
from tests import factories


def test_an_older_body_s_end_leaves_the_newer_body_live() -> None:
    live = LiveRuns(Memories())
    old, new = factories.pipelinerun(uid="u"), factories.pipelinerun(uid="u")
    live.keep("u", old)
    live.keep("u", new)
    live.drop("u", only=old)  # a decision on the old body found the run ended
    assert live.holds("u", new) and not live.holds("u", old)
    live.drop("u")
    assert "u" not in live and live.get("u") is None


def test_a_round_goes_over_the_runs_not_reconciled_since_and_not_left_alone() -> None:
    live = LiveRuns(Memories())
    for uid in ("early", "late", "settled"):
        live.keep(uid, factories.pipelinerun(uid=uid))
    live.reconciled("early")
    since = time.monotonic()
    live.reconciled("late")
    bodies, left_alone = live.not_reconciled_since(since, skips=lambda uid: uid == "settled")
    assert [b["metadata"]["uid"] for b in bodies] == ["early"]
    assert left_alone == 2


def test_a_run_not_live_is_neither_refreshed_nor_noted_as_reconciled() -> None:
    live = LiveRuns(Memories())
    assert live.refresh("gone", factories.pipelinerun(uid="gone")) is False
    assert live.reconciled("gone") is False
    assert list(live) == [] and live.runs() == []


def test_a_live_run_is_its_memory_s_body_and_its_end_forgets_that_alone() -> None:
    memory = Memories()
    live = LiveRuns(memory)
    body = factories.pipelinerun(uid="u")
    live.keep("u", body)
    memory.set("u", marked=True)
    assert memory.get("u").body is body and live.runs()[0].uid == "u"
    live.reconciled("u")
    live.drop("u")
    assert "u" not in live and memory.get("u").marked  # what else is remembered stays
    assert memory.get("u").reconciled is None
    memory.reset("u", "marked")
    assert memory.runs(lambda m: True) == []  # nothing left of it: not kept at all
