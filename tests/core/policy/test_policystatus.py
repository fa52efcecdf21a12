from __future__ import annotations

from controller.core.basics.actions import Say, WritePolicyStatus
from controller.core.policy import policystatus
from controller.core.policy.policy import PolicyProblem
from controller.settings import Settings

NOW = "2026-11-22T04:00:00Z"


def policy_obj(generation: int = 2, status: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "namespace": "a", "generation": generation},
        "spec": {},
        "status": status or {},
    }


def test_ready_policy_gets_ready_true_with_its_generation() -> None:
    status = policystatus.wanted_status(policy_obj(), [], NOW)
    assert status is not None
    assert status["observedGeneration"] == 2
    (cond,) = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Ready", "True", "Active")


def test_problem_is_the_condition() -> None:
    status = policystatus.wanted_status(
        policy_obj(), [PolicyProblem("p", "Invalid", "spec.x: bad")], NOW
    )
    assert status is not None
    (cond,) = status["conditions"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Invalid", "spec.x: bad")


def test_nothing_to_write_when_the_status_already_says_it() -> None:
    written = policystatus.wanted_status(policy_obj(), [], NOW)
    assert policystatus.wanted_status(policy_obj(status=written), [], "later") is None
    # a new generation is observed again
    assert policystatus.wanted_status(policy_obj(generation=3, status=written), [], NOW) is not None


def _named(name: str, created: str, spec: dict[str, object]) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "a", "creationTimestamp": created},
        "spec": spec,
    }


def test_a_newer_policy_is_superseded_even_before_any_list_shows_it() -> None:
    older = _named("older", "2026-01-01T00:00:00Z", {"isolation": "none"})
    newer = _named("newer", "2026-02-01T00:00:00Z", {"isolation": "required"})
    settings = Settings()
    assert [p.reason for p in policystatus.problems_of(settings.default_policy(), newer, [older])] == ["Superseded"]
    assert policystatus.problems_of(settings.default_policy(), older, [older, newer]) == []
    bad = _named("older", "2026-01-01T00:00:00Z", {"isolation": "always"})
    assert [p.reason for p in policystatus.problems_of(settings.default_policy(), bad, [])] == ["Invalid"]


def test_the_plan_writes_the_status_then_says_its_first_problem_once_a_generation() -> None:
    base = Settings().default_policy()
    older = _named("older", "2026-01-01T00:00:00Z", {"isolation": "none"})
    newer = {**_named("newer", "2026-02-01T00:00:00Z", {"isolation": "required"}),
             "status": {}}
    newer["metadata"] = {**newer["metadata"], "uid": "u2", "generation": 4}  # type: ignore[dict-item]
    write, say = policystatus.plan(base, newer, [older, newer], NOW)
    assert isinstance(write, WritePolicyStatus) and isinstance(say, Say)
    assert (write.namespace, write.name) == ("a", "newer")
    assert write.status["conditions"][0]["reason"] == "Superseded"
    assert say.notice.reason == "PolicySuperseded" and say.key == ("u2", 4)
    assert say.involved["kind"] == "CoschedulingPolicy"


def test_the_plan_of_a_policy_whose_status_says_it_already_is_empty() -> None:
    base = Settings().default_policy()
    [write] = policystatus.plan(base, policy_obj(), [], NOW)  # Ready: written, nothing said
    assert isinstance(write, WritePolicyStatus)
    assert policystatus.plan(base, policy_obj(status=dict(write.status)), [], "later") == ()
