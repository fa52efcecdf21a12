"""The leader's caches: a listener that fails never breaks the watch it hears."""

from __future__ import annotations

from typing import Any

import kubernetes

from controller.kube.caches import Caches
from controller.kube.client import Kube
from controller.kube.clusterview import Facts


def test_a_listener_that_fails_is_said_and_the_others_still_hear() -> None:
    caches = Caches(Kube(kubernetes.client.ApiClient()), timeout=1.0)
    caches.follow_namespaces(Facts(), Facts(synced=True, enabled_namespaces=frozenset({"ns"})))
    heard: list[str] = []

    def failing(obj: Any) -> None:
        raise TimeoutError("the API server did not answer")

    caches.listen("claims", failing)
    caches.listen("claims", lambda obj: heard.append(obj["metadata"]["name"]))
    claim = {"metadata": {"namespace": "ns", "name": "ws", "resourceVersion": "1"}}
    caches._on_object("claims", claim)  # as the claims watch hands it on: no exception
    assert heard == ["ws"]
