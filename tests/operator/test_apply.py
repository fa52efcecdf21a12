"""A plan applied (operator/apply.py): its actions in order, each answer judged for what
follows. A mark that cannot be made is given up for this look and the rest is done; every held
pod is tried before a failure that may mend is raised; a reservation pod refused is said, and
the balloon planned again without one (a scout's, not a keeper's)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.basics import actions
from controller.core.capacity import reservation
from controller.core.model.tekton import PipelineRun
from controller.core.placement import gate
from controller.core.placement.memory import Gated
from controller.kube.client import ApiError
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.apply import Applier
from controller.operator.executor import Executor, Notifier
from controller.operator.memory import Memories
from tests import factories

RUN = PipelineRun.from_body(factories.pipelinerun())
UID = factories.RUN_UID


class Writes:
    """The API client's writes the applier's actions make; `refused`: name -> the error."""

    def __init__(self, refused: dict[str, ApiError] | None = None) -> None:
        self.made: list[str] = []
        self.refused = refused or {}

    def _call(self, name: str) -> bool:
        if name in self.refused:
            raise self.refused[name]
        self.made.append(name)
        return True

    def patch_tekton(self, namespace: str, plural: str, name: str, patch: Any) -> bool:
        return self._call(f"mark {name}")

    def create_pod(self, manifest: Any) -> bool:
        return self._call(f"make {manifest['metadata']['name']}")

    def release_pod_gate(self, namespace: str, name: str, uid: str, patch: Any) -> bool:
        return self._call(f"release {name}")

    def post_event(self, involved: Any, reason: str, message: str, warning: bool = True) -> None:
        self.made.append(f"event {reason}")

    def get_statefulset(self, namespace: str, name: str) -> None:
        return None


def applier(kube: Writes) -> tuple[Applier, Memories]:
    memory, metrics = Memories(), Metrics()
    executor = Executor(kube, Notifier(kube))  # type: ignore[arg-type]
    return Applier(executor, metrics, PodIndex(), memory), memory


def mark(name: str, plural: str = "taskruns") -> actions.Mark:
    return actions.Mark(plural, "team-a", name, {"metadata": {"labels": {}}})


def pod(name: str, role: str = reservation.SCOUT) -> actions.MakePod:
    return actions.MakePod({"metadata": {"name": name, "namespace": "team-a", "annotations": {
        reservation.ANNOTATION_ROLE: role}}})


def test_a_mark_refused_for_good_is_given_up_and_the_rest_of_the_plan_is_done() -> None:
    kube = Writes({"mark build-42": ApiError(status=403, reason="Forbidden")})
    apply, memory = applier(kube)
    done = apply.apply(RUN, [mark("build-42", "pipelineruns"), mark("build-42-fetch"),
                             actions.Remember(UID, {"marked": True}), pod("room")])
    assert not done.marked and not memory.get(UID).marked  # its next event tries again
    assert kube.made == ["make room"]  # its TaskRuns' marks skipped, its reservation made


def test_a_mark_that_may_mend_ends_the_plan_there_for_the_queue_to_retry() -> None:
    kube = Writes({"mark build-42": ApiError(status=503, reason="Service Unavailable")})
    apply, memory = applier(kube)
    with pytest.raises(ApiError):
        apply.apply(RUN, [mark("build-42", "pipelineruns"), pod("room")])
    assert kube.made == [] and not memory.get(UID).marked


def test_every_held_pod_is_tried_before_a_failure_that_may_mend_is_raised() -> None:
    kube = Writes({"release first": ApiError(status=503, reason="Service Unavailable")})
    apply, memory = applier(kube)
    held = [Gated("u1", "team-a", "first"), Gated("u2", "team-a", "second")]
    memory.set(UID, gated=tuple(held))
    with pytest.raises(ApiError):
        apply.apply(RUN, [*gate.releases(UID, held, (), ""), pod("room")])
    assert kube.made == ["release second"]  # the plan's next action waits for the retry
    assert memory.get(UID).gated == (held[0],)  # the one let go is remembered so


@pytest.mark.parametrize(("role", "replan"), [(reservation.SCOUT, True),
                                              (reservation.KEEPER, False)])
def test_a_reservation_pod_refused_for_good_is_said_and_a_scout_s_balloon_planned_without(
        role: str, replan: bool) -> None:
    kube = Writes({"make room": ApiError(status=403, reason="no PriorityClass")})
    apply, memory = applier(kube)
    done = apply.apply(RUN, [pod("room", role), mark("after")])
    assert done.replan is replan
    assert kube.made == ["event RoomNotReserved"]  # the rest waits for the plan made again
    assert memory.refused("team-a") is not None  # its namespace's runs do without, a while


def test_what_a_plan_counts_is_counted_where_it_comes_and_asks_nothing_of_the_cluster() -> None:
    kube = Writes({"make room": ApiError(status=500, reason="InternalError")})
    apply, _ = applier(kube)
    metrics = apply.metrics
    with pytest.raises(ApiError):  # counted before the failure that ends the plan, not after
        apply.apply(RUN, [actions.Count("misplaced_pods"),
                          actions.Count("anchor_moves", (("reason", "cordoned"),)), pod("room"),
                          actions.Count("misplaced_pods")])
    assert metrics.misplaced_pods._value.get() == 1
    assert metrics.anchor_moves.labels(reason="cordoned")._value.get() == 1
    assert kube.made == []
