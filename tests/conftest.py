from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from controller.core.policy import policy
from controller.settings import Settings


@dataclass
class StaticFacts:
    """Facts the webhook would know from a synced cluster view."""

    enabled: set[str] = field(default_factory=lambda: {"team-a"})
    synced: bool = True
    keys: dict[str, str] = field(default_factory=dict)

    def namespace_enabled(self, namespace: str) -> bool:
        return namespace in self.enabled

    def topology_key(self, namespace: str) -> str:
        return self.keys.get(namespace, "kubernetes.io/hostname")


@pytest.fixture
def facts() -> StaticFacts:
    return StaticFacts()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    import os

    for key in list(os.environ):
        if key.startswith("COSCHEDULER_"):
            monkeypatch.delenv(key)
    yield monkeypatch


@pytest.fixture
def settings(clean_env: pytest.MonkeyPatch) -> Settings:
    return Settings()


@pytest.fixture
def default_policy(settings: Settings) -> policy.EffectivePolicy:
    return settings.default_policy()
