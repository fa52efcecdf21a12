"""The webhook's own certificate: made once into its Secret, whichever replica wins, the CA put
into the webhook configuration only where it differs, and served as made."""

from __future__ import annotations

import base64
import ipaddress
import re
import ssl
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from kubernetes.client.exceptions import ApiException

from controller.kube import webhook_tls

CONFIGURATION = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/tcs"
SECRET = "/api/v1/namespaces/ops/secrets/tcs-webhook-tls"


def configuration(**client_config: Any) -> dict[str, Any]:
    config = client_config or {"service": {"name": "tcs", "namespace": "ops", "path": "/m"}}
    return {"metadata": {"name": "tcs"},
            "webhooks": [{"name": "pods.x", "clientConfig": dict(config)},
                         {"name": "anchored-pods.x", "clientConfig": dict(config)}]}


class FakeApi:
    """The few calls ensure() makes, on objects kept here; `rival`: a Secret another replica
    creates between our read and our create."""

    def __init__(self, objects: dict[str, Any], rival: dict[str, Any] | None = None) -> None:
        self.objects, self.rival = objects, rival
        self.writes: list[tuple[str, str]] = []

    def json(self, method: str, url_path: str, body: Any = None) -> dict[str, Any]:
        found: dict[str, Any] = self.objects[url_path]
        return found

    def get_or_none(self, url_path: str) -> dict[str, Any] | None:
        return self.objects.get(url_path)

    def _create_new(self, url_path: str, manifest: dict[str, Any]) -> bool:
        self.writes.append(("create", url_path))
        if self.rival is not None:
            self.objects[SECRET] = self.rival
            return False
        self.objects[f"{url_path}/{manifest['metadata']['name']}"] = manifest
        return True

    def send(self, method: str, url_path: str, body: Any = None, content_type: str = "") -> None:
        assert content_type == webhook_tls.JSON_PATCH
        self.writes.append(("patch", url_path))
        target = self.objects[url_path]
        for op in body:
            index, *rest = op["path"].split("/")[2:]
            if op["op"] == "test":
                assert target["webhooks"][int(index)]["name"] == op["value"]
            else:
                target["webhooks"][int(index)]["clientConfig"][rest[-1]] = op["value"]


def ensure(api: FakeApi) -> webhook_tls.Pair:
    return webhook_tls.ensure(api, "ops", "tcs-webhook-tls", "tcs",  # type: ignore[arg-type]
                              {"app.kubernetes.io/managed-by": "tekton-coscheduler"})


def ca_bundles(api: FakeApi) -> set[str]:
    return {h["clientConfig"].get("caBundle") for h in api.objects[CONFIGURATION]["webhooks"]}


def test_names_are_those_the_api_server_dials() -> None:
    dns, ips = webhook_tls.serving_names(configuration())
    assert (dns, ips) == (["tcs", "tcs.ops", "tcs.ops.svc", "tcs.ops.svc.cluster.local"], [])
    assert webhook_tls.serving_names(configuration(url="https://127.0.0.1:9443/m")) == ([], ["127.0.0.1"])
    assert webhook_tls.serving_names(configuration(url="https://hooks.example.com/m")) == (
        ["hooks.example.com"], [])
    with pytest.raises(webhook_tls.CertificateError, match="tcs names no service or URL"):
        webhook_tls.serving_names({"metadata": {"name": "tcs"}, "webhooks": []})


def test_the_pair_is_a_ca_and_a_serving_certificate_it_signed_for_those_names() -> None:
    pair = webhook_tls.make_pair(["tcs.ops.svc"], ["127.0.0.1"], days=30)
    ca, cert = x509.load_pem_x509_certificate(pair.ca), x509.load_pem_x509_certificate(pair.cert)
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["tcs.ops.svc"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == 30
    # and a TLS server takes the pair as it is written
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_verify_locations(cadata=pair.ca.decode())


def test_the_first_start_makes_the_pair_and_the_ca_is_trusted_then_nothing_changes() -> None:
    api = FakeApi({CONFIGURATION: configuration()})
    pair = ensure(api)
    assert api.writes == [("create", "/api/v1/namespaces/ops/secrets"), ("patch", CONFIGURATION)]
    secret = api.objects[SECRET]
    assert secret["type"] == "kubernetes.io/tls" and webhook_tls.pair_of(secret) == pair
    assert ca_bundles(api) == {base64.b64encode(pair.ca).decode()}
    # a restart, another replica, a re-applied chart: the same pair, no write
    api.writes.clear()
    assert ensure(api) == pair
    assert api.writes == []
    # a re-applied configuration without a caBundle (GitOps): only the caBundle is set again
    api.objects[CONFIGURATION] = configuration()
    assert ensure(api) == pair
    assert api.writes == [("patch", CONFIGURATION)]


def test_a_replica_that_loses_the_race_serves_the_winner_s_pair() -> None:
    theirs = webhook_tls.make_pair(["tcs.ops.svc"], [])
    rival = webhook_tls.secret_of(theirs, "ops", "tcs-webhook-tls", {})
    api = FakeApi({CONFIGURATION: configuration()}, rival=rival)
    assert ensure(api) == theirs
    assert ca_bundles(api) == {base64.b64encode(theirs.ca).decode()}


def test_a_pair_made_by_the_chart_s_generate_mode_is_kept() -> None:
    chart_made = webhook_tls.make_pair(["tcs.ops.svc"], [])
    secret = webhook_tls.secret_of(chart_made, "ops", "tcs-webhook-tls", {})
    config = configuration()
    for hook in config["webhooks"]:
        hook["clientConfig"]["caBundle"] = secret["data"]["ca.crt"]
    api = FakeApi({CONFIGURATION: config, SECRET: secret})
    assert ensure(api) == chart_made
    assert api.writes == []


def test_a_secret_without_a_pair_is_refused_with_what_to_do() -> None:
    api = FakeApi({CONFIGURATION: configuration(), SECRET: {"data": {"tls.crt": "eA=="}}})
    with pytest.raises(webhook_tls.CertificateError, match=re.escape("lacks one of ca.crt, tls.crt, tls.key: delete it")):
        ensure(api)
    assert api.writes == []


def test_an_absent_configuration_is_the_api_server_s_404() -> None:
    class Missing(FakeApi):
        def json(self, method: str, url_path: str, body: Any = None) -> dict[str, Any]:
            raise ApiException(status=404, reason="Not Found")

    with pytest.raises(ApiException):
        ensure(Missing({}))


def test_the_files_are_written_whole_and_the_key_for_this_user_only(tmp_path: Path) -> None:
    pair = webhook_tls.make_pair(["tcs.ops.svc"], [])
    cert, key = tmp_path / "tls" / "tls.crt", tmp_path / "tls" / "tls.key"
    webhook_tls.write(pair, cert, key)
    assert (cert.read_bytes(), key.read_bytes()) == (pair.cert, pair.key)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    assert sorted(p.name for p in cert.parent.iterdir()) == ["tls.crt", "tls.key"]
