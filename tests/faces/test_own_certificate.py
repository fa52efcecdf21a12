"""The server's own certificate at start (the chart's `controller` TLS mode): retried while the
API server or the webhook configuration is not there yet, written where the server reads it,
and, failing for good, the process ends with the API server's answer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controller.faces import app
from controller.kube import webhook_tls
from controller.settings import Settings


def settings(tmp_path: Path) -> Settings:
    return Settings(webhook_tls_secret="tcs-webhook-tls", webhook_configuration="tcs",
                    webhook_cert_file=tmp_path / "tls.crt", webhook_key_file=tmp_path / "tls.key",
                    leader_election_namespace="ops")


@pytest.fixture
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)  # the module app uses (app.asyncio)
    return slept


async def test_retried_until_the_configuration_is_there_then_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_waiting: list[float]
) -> None:
    pair = webhook_tls.make_pair(["tcs.ops.svc"], [])
    asked: list[tuple[Any, ...]] = []

    def ensure(*args: Any) -> webhook_tls.Pair:
        asked.append(args[1:])
        if len(asked) < 3:  # a GitOps sync applies the configuration after the Deployment
            raise ApiException(status=404, reason="Not Found")
        return pair

    monkeypatch.setattr(webhook_tls, "ensure", ensure)
    await app.keep_own_certificate(settings(tmp_path), kube=None)  # type: ignore[arg-type]
    assert asked[0] == ("ops", "tcs-webhook-tls", "tcs", {"app.kubernetes.io/managed-by": "tekton-coscheduler"})
    assert len(asked) == 3 and len(no_waiting) == 2
    assert (tmp_path / "tls.crt").read_bytes() == pair.cert
    assert (tmp_path / "tls.key").read_bytes() == pair.key


async def test_failing_for_good_ends_with_the_api_server_s_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_waiting: list[float]
) -> None:
    def ensure(*args: Any) -> webhook_tls.Pair:
        raise ApiException(status=403, reason="Forbidden")

    monkeypatch.setattr(webhook_tls, "ensure", ensure)
    with pytest.raises(ApiException, match="Forbidden"):
        await app.keep_own_certificate(settings(tmp_path), kube=None, attempts=3)  # type: ignore[arg-type]
    assert len(no_waiting) == 2
    assert not (tmp_path / "tls.crt").exists()


def test_settings_refuse_half_a_configuration(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="set together"):
        Settings(webhook_tls_secret="tcs-webhook-tls")
    with pytest.raises(ValueError, match="where the server writes the certificate"):
        Settings(webhook_tls_secret="tcs-webhook-tls", webhook_configuration="tcs")
