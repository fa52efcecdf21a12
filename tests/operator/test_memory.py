"""Every run's memory in one place: changed in one step, kept only while it holds something."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import replace

import pytest

from controller.core.placement.memory import EMPTY
from controller.operator.memory import Memories, later


def test_a_change_returns_the_memory_before_it_and_a_run_back_to_empty_is_not_kept() -> None:
    memory = Memories()
    assert memory.set("r1", marked=True) == EMPTY
    assert memory.get("r1").marked
    assert memory.set("r1", blocked_on="n1").marked
    assert memory.reset("r1", "marked").blocked_on == "n1"
    assert memory.runs(lambda m: True) == ["r1"]
    memory.reset("r1", "blocked_on")
    assert memory.runs(lambda m: True) == []  # nothing left to remember: the run costs nothing


def test_a_field_that_is_not_one_is_refused() -> None:
    with pytest.raises(KeyError, match="no such field"):
        Memories().reset("r1", "markd")
    with pytest.raises(TypeError):
        Memories().set("r1", markd=True)


def test_a_test_and_set_is_one_step_whatever_the_threads() -> None:
    """Of many workers asking at once to mark a run, one is told it may."""
    memory, start, won = Memories(), threading.Barrier(8), []

    def claim() -> None:
        start.wait()
        if not memory.update("r1", lambda m: replace(m, marked=True)).marked:
            won.append(1)

    workers = [threading.Thread(target=claim) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert won == [1]


def test_a_wait_is_work_put_for_later_once_however_often_asked_and_the_earliest_kept() -> None:
    """operator/memory.later: every wait of the operator is work on the queue under the run's
    key; asked again before it comes, it is not put twice, unless sooner; a replaced one, or
    one of a run forgotten meanwhile, does nothing when it comes."""
    memory = Memories()
    put: list[tuple[str, object, float]] = []
    acts: list[Callable[[], None]] = []
    done: list[str] = []

    def soon(key: str, slot: Hashable, act: Callable[[], None], seconds: float) -> None:
        put.append((key, slot, seconds))
        acts.append(act)

    later(memory, soon, "r1", "room", lambda: done.append("room"), 5.0)
    later(memory, soon, "r1", "room", lambda: done.append("room"), 7.0)  # the first asks again
    assert put == [("r1", ("later", "room"), 5.0)]
    later(memory, soon, "r1", "room", lambda: done.append("sooner"), 1.0)  # sooner: put
    assert len(put) == 2
    acts[0]()  # the replaced one comes: nothing
    assert done == []
    acts[1]()
    assert done == ["sooner"] and memory.get("r1") == EMPTY  # nothing left of the run
    later(memory, soon, "r1", "anchor", lambda: done.append("anchor"), 5.0)
    memory.reset("r1", "due")  # the run forgotten
    acts[2]()
    assert done == ["sooner"]
