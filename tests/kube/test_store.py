"""The indexed stores behind the watch caches: an event, and what one run's decision reads, cost
the same whatever the namespace holds (the work counted as objects touched, not timed)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from controller.kube.caches import OWNER, Caches
from controller.kube.clusterview import Facts
from controller.kube.store import Indexed, owner_uids


def claim(name: str, ns: str = "team", owner: str = "", version: str = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": version}
    if owner:
        meta["ownerReferences"] = [{"kind": "PipelineRun", "name": "r", "uid": owner}]
    return {"metadata": meta, "spec": {"accessModes": ["ReadWriteOnce"]}}


def crowd(n: int) -> list[dict[str, Any]]:
    """n claims of other runs in the same namespace, and some elsewhere."""
    return [claim(f"other-{i}", owner=f"uid-{i}") for i in range(n)] + [
        claim(f"far-{i}", ns="elsewhere") for i in range(n // 10)]


def work_of_one_event(store: Indexed) -> tuple[int, list[str], str | None]:
    """A watch event on one of the run's claims, then what the run's decision reads."""
    before = store.touched
    store.upsert(claim("mine-0", owner="run-uid", version="2"))
    owned = sorted(o["metadata"]["name"] for o in store.by(OWNER, "run-uid"))
    named = store.named("team", "shared-cache")
    return store.touched - before, owned, named["metadata"]["name"] if named else None


@pytest.mark.parametrize("size", [10, 10_000])
def test_an_event_and_a_run_s_reads_touch_the_same_objects_at_any_namespace_size(
    size: int,
) -> None:
    store = Indexed({OWNER: owner_uids})
    store.replace([*crowd(size), claim("mine-0", owner="run-uid"),
                   claim("mine-1", owner="run-uid"), claim("shared-cache")])
    touched, owned, named = work_of_one_event(store)
    assert (owned, named) == (["mine-0", "mine-1"], "shared-cache")
    assert touched == 5  # the old entry out, the new in; two owned read; one by name


def test_an_update_moves_an_object_between_index_entries_and_a_delete_leaves_none() -> None:
    store = Indexed({OWNER: owner_uids})
    store.replace([claim("c", owner="a")])
    store.upsert(claim("c", owner="b", version="2"))
    assert store.by(OWNER, "a") == [] and len(store.by(OWNER, "b")) == 1
    store.delete(claim("c", owner="b"))
    assert store.by(OWNER, "b") == [] and store.in_namespace("team") == [] and len(store) == 0
    store.delete(claim("never-there"))  # a DELETED for what a relist already dropped
    assert len(store) == 0


def test_a_relist_replaces_the_whole_store_and_its_indexes() -> None:
    store = Indexed({OWNER: owner_uids})
    store.replace([claim("gone", owner="a"), claim("kept", owner="a")])
    store.replace([claim("kept", owner="a"), claim("new", ns="other")])
    assert sorted(o["metadata"]["name"] for o in store.by(OWNER, "a")) == ["kept"]
    assert [o["metadata"]["name"] for o in store.in_namespace("other")] == ["new"]


class _Never:
    def __getattr__(self, name: str) -> Any:
        def call(*_: Any, **__: Any) -> Any:
            raise AssertionError(f"no API call expected: {name}")
        return call


def caches() -> Caches:
    """Caches over a client that is never called: the stores are fed by hand."""
    kube: Any = SimpleNamespace(core=_Never(), apps=_Never(), custom=_Never(), policy=_Never())
    return Caches(kube, timeout=1.0)


@pytest.mark.parametrize("size", [10, 10_000])
def test_a_run_s_claims_are_read_from_the_indexes_not_the_namespace(size: int) -> None:
    c = caches()
    watch = c.watches["claims"]
    watch.store.replace([*crowd(size), claim("mine", owner="run-uid"), claim("named")])
    watch.synced.set()
    before = watch.store.touched
    found = c.claims_of("team", "run-uid", ["named", "mine", "missing"])
    assert sorted(o["metadata"]["name"] for o in found or []) == ["mine", "named"]
    assert watch.store.touched - before == 3  # one owned, two names looked up


def test_a_cache_not_yet_synced_answers_none_and_listeners_hear_only_enabled_namespaces() -> None:
    c = caches()
    assert c.claims_of("team", "uid", []) is None and c.limit_ranges("team") is None
    heard: list[str] = []
    c.listen("resolutionrequests", lambda o: heard.append(o["metadata"]["name"]))
    c.follow_namespaces(Facts(), Facts(synced=True, enabled_namespaces=frozenset({"team"})))
    c._on_object("resolutionrequests", claim("ours"))
    c._on_object("resolutionrequests", claim("theirs", ns="not-enabled"))
    assert heard == ["ours"]


def test_a_listener_that_reads_part_of_an_object_hears_only_when_that_part_changes() -> None:
    c = caches()
    heard: list[str] = []
    c.listen("claims", lambda o: heard.append(o["status"]["phase"]),
             reads=lambda o: o.get("spec"))
    c.follow_namespaces(Facts(), Facts(synced=True, enabled_namespaces=frozenset({"team"})))
    made = {**claim("c"), "spec": {"accessModes": ["ReadWriteOnce"]}, "status": {"phase": "new"}}
    bound = {**made, "status": {"phase": "bound"}}
    resized = {**bound, "spec": {"accessModes": ["ReadWriteMany"]}, "status": {"phase": "resized"}}
    gone = {**resized, "status": {"phase": "gone"}}
    c._on_object("claims", made, None)
    c._on_object("claims", bound, made)
    c._on_object("claims", resized, bound)
    c._on_object("claims", gone, resized, deleted=True)
    assert heard == ["new", "resized", "gone"]
