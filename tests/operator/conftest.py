"""Every tests/operator scenario's writes and Events are held to the record in
tests/operator/writes/ (README.md beside this file says how to update it and what a difference
means; recording.py how a write is recorded and keyed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.operator import recording

WRITES = Path(__file__).parent / "writes"
ROOT = Path(__file__).parents[2]
ENV = "RECORD_WRITES"
UPDATE = "update"

RECORDER = pytest.StashKey[recording.Recorder]()
# In update mode: module file name -> test name -> records, and each module's test names.
UPDATED = pytest.StashKey[dict[str, dict[str, list[dict[str, Any]]]]]()
COLLECTED = pytest.StashKey[dict[str, set[str]]]()
UPDATING = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    mode = os.environ.get(ENV, "")
    if mode not in ("", UPDATE):
        raise pytest.UsageError(f"{ENV}={mode!r}: set it to {UPDATE!r} to record, or leave it unset "
                                "to compare with the record")
    config.stash[UPDATING] = mode == UPDATE


def _file(item: pytest.Item) -> str:
    return f"{Path(str(item.fspath)).stem}.json"


def pytest_itemcollected(item: pytest.Item) -> None:
    item.config.stash.setdefault(COLLECTED, {}).setdefault(_file(item), set()).add(item.name)


@pytest.fixture(autouse=True)
def writes_recorded(request: pytest.FixtureRequest,
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[recording.Recorder]:
    """The scenario's writes, recorded while it runs (compared once it has passed)."""
    recorder = recording.Recorder()
    recording.install(recorder, monkeypatch)
    request.node.stash[RECORDER] = recorder
    yield recorder


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    result = yield  # a scenario that fails says so itself; its writes are not compared
    recorder = item.stash.get(RECORDER, None)
    if recorder is None:
        return result
    if recorder.while_observing:
        pytest.fail(f"a run's observation wrote: {recorder.while_observing}", pytrace=False)
    records = recorder.records()
    if item.config.stash[UPDATING]:
        item.config.stash.setdefault(UPDATED, {}).setdefault(_file(item), {})[item.name] = records
        return result
    path = WRITES / _file(item)
    recorded = recording.load(path)
    if item.name not in recorded:
        pytest.fail(f"no record of this scenario's writes in {path.relative_to(ROOT)}: "
                    f"record them with {ENV}={UPDATE} (tests/operator/README.md)", pytrace=False)
    diff = recording.difference(recorded[item.name], records)
    if diff:
        pytest.fail(f"the writes differ from the record ({path.name}), per key:\n{diff}\n"
                    f"(tests/operator/README.md: what a difference means, how to update)",
                    pytrace=False)
    return result


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Update mode: each module's record, its scenarios that ran replaced, those it no longer
    has dropped. A module whose tests were named one by one (path::test) was not collected
    whole: none of its entries is dropped."""
    updated = session.config.stash.get(UPDATED, {})
    collected = session.config.stash.get(COLLECTED, {})
    named = {f"{Path(arg.split('::')[0]).stem}.json" for arg in session.config.args
             if "::" in arg}
    for name, tests in updated.items():
        path = WRITES / name
        kept = {t: r for t, r in recording.load(path).items()
                if name in named or t in collected.get(name, ())}
        recording.save(path, kept | tests)
