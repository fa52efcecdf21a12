"""The one executor: every write of the operator goes through it, and comes back as data."""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path
from typing import Any

import pytest

from controller.core.basics import actions
from controller.core.basics.notices import Notice
from controller.kube.client import ApiError
from controller.kube.fencing import NotLeading
from controller.operator.executor import Executor
from tests import apisurface

OPERATOR = Path(__file__).resolve().parents[2] / "controller" / "operator"
LEASE = {"create_lease", "replace_lease"}  # kube/leadership.py's, below the operator
# The executor writes, and its event poster (Notifier) posts the Events it hands it.
WRITERS = {"executor.py": set(apisurface.WRITES) - LEASE}


def _write_calls(path: Path) -> set[str]:
    """Names of the client's write methods called in a module (`x.create_pod(...)`)."""
    return {node.func.attr for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in apisurface.WRITES}


def test_only_the_executor_calls_a_write_method_of_the_api_client() -> None:
    calls = {path.name: found for path in sorted(OPERATOR.glob("*.py"))
             if (found := _write_calls(path))}
    assert calls == {name: allowed for name, allowed in WRITERS.items()}


class Recording:
    """Every write of the API client, as the executor calls it."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.fail = fail

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args + tuple(kwargs.values())))
            if self.fail is not None:
                raise self.fail
            return "answer"
        return call


def _sample(kind: type[Any]) -> Any:
    """An action of that kind, its fields filled."""
    hints = typing.get_type_hints(kind)
    return kind(**{field.name: Notice("Reason", "message") if hints[field.name] is Notice
                   else {"metadata": {"name": "x"}} if "Mapping" in str(hints[field.name])
                   else "x" for field in dataclasses.fields(kind)})


ACTIONS = typing.get_args(actions.Action)


@pytest.mark.parametrize("kind", ACTIONS, ids=lambda k: k.__name__)
def test_each_action_is_one_call_whose_answer_comes_back(kind: type[Any]) -> None:
    kube, told = Recording(), Recording()
    done = Executor(kube, told, kube).do(_sample(kind))  # type: ignore[arg-type]
    assert done.ok and done.value == "answer" and done.get() == "answer"
    assert len(kube.calls) + len(told.calls) == 1
    [(name, _)] = kube.calls or told.calls
    assert name in apisurface.WRITES or name in ("tell", "forget")


def test_every_write_of_the_client_has_an_action() -> None:
    kube = Recording()
    for kind in ACTIONS:
        Executor(kube, kube, kube).do(_sample(kind))  # type: ignore[arg-type]
    made = {name for name, _ in kube.calls}
    assert made - {"tell", "forget"} == set(apisurface.WRITES) - LEASE - {"post_event"}


def test_a_failed_write_comes_back_as_data_judged_as_the_work_queue_judges_it() -> None:
    throttled = ApiError(status=429, reason="Too Many Requests")
    done = Executor(Recording(fail=throttled), None).do(  # type: ignore[arg-type]
        actions.MakePod({"metadata": {"name": "p"}}))
    assert not done.ok and done.api_error is throttled
    assert done.failure is not None and done.failure.retry and done.failure.reason == "throttled"
    with pytest.raises(ApiError):
        done.get()  # handed to the work queue as it came

    broken = ConnectionResetError("reset by peer")
    done = Executor(Recording(fail=broken), None).do(  # type: ignore[arg-type]
        actions.DeletePod("ns", "p", "uid", 0))
    assert done.error is broken and done.api_error is None
    assert done.failure is not None and done.failure.reason == "connection"


def test_a_write_refused_because_the_lease_is_lost_is_not_data_it_ends_the_turn() -> None:
    executor = Executor(Recording(fail=NotLeading("lease lost")), None)  # type: ignore[arg-type]
    with pytest.raises(NotLeading):
        executor.do(actions.MakeBalloon({"metadata": {"name": "b"}}))
