"""The webhook's own certificate, kept by the server (the chart's `controller` TLS mode).

For installs that render the chart without a cluster to ask (`helm template | kubectl apply`,
Argo CD, Flux), where the chart cannot keep a certificate it made: each replica, at start,

1. reads the Secret; when absent, makes a CA and a serving certificate for the names the API
   server dials (the webhook configuration's Service, or its URL's host) and creates it. Of
   replicas racing, the API server lets one create it; the others get 409 Conflict and read
   the winner's back, so that every replica serves the same pair;
2. sets the webhook configuration's caBundle to that CA where it differs: a JSON patch of that
   field alone (a manifest re-applied without a caBundle leaves it, since it never set it);
3. writes the pair where the server reads its certificate files.

A Secret that holds a pair already (one the chart's `generate` mode made, say) is used as it is.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.kube.api import Api, Obj, path

log = structlog.get_logger(__name__)

VALIDITY_DAYS = 3650
KEYS = ("ca.crt", "tls.crt", "tls.key")
ADMISSION = "admissionregistration.k8s.io/v1"
JSON_PATCH = "application/json-patch+json"


class CertificateError(Exception):
    """The Secret or the webhook configuration is not one the server can keep its pair in."""


@dataclass(frozen=True)
class Pair:
    """PEM: the CA's certificate, and the serving certificate and its key."""

    ca: bytes
    cert: bytes
    key: bytes


def serving_names(configuration: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) by which the API server reaches the configuration's webhooks."""
    dns: list[str] = []
    ips: list[str] = []
    for hook in configuration.get("webhooks") or []:
        client_config = hook.get("clientConfig") or {}
        service = client_config.get("service")
        if service:
            host = f"{service['name']}.{service['namespace']}"
            dns += [service["name"], host, f"{host}.svc", f"{host}.svc.cluster.local"]
        elif client_config.get("url"):
            found = urlsplit(client_config["url"]).hostname or ""
            try:
                ips.append(str(ipaddress.ip_address(found)))
            except ValueError:
                dns.append(found)
    if not dns and not ips:
        name = (configuration.get("metadata") or {}).get("name")
        raise CertificateError(f"webhook configuration {name} names no service or URL")
    return list(dict.fromkeys(dns)), list(dict.fromkeys(ips))


def make_pair(dns: list[str], ips: list[str], days: int = VALIDITY_DAYS,
              now: datetime.datetime | None = None) -> Pair:
    """A CA of its own, and a certificate it signs for these names (ECDSA P-256)."""
    start = (now or datetime.datetime.now(datetime.UTC)) - datetime.timedelta(minutes=5)
    end = start + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tekton-coscheduler-webhook-ca")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, (dns or ips)[0])]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return Pair(
        ca=ca.public_bytes(pem),
        cert=cert.public_bytes(pem),
        key=key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
    )


def pair_of(secret: Mapping[str, Any]) -> Pair | None:
    """The pair a Secret holds; None when it lacks one of ca.crt, tls.crt, tls.key."""
    data = secret.get("data") or {}
    if not all(data.get(k) for k in KEYS):
        return None
    ca, cert, key = (base64.b64decode(data[k]) for k in KEYS)
    return Pair(ca=ca, cert=cert, key=key)


def secret_of(pair: Pair, namespace: str, name: str, labels: Mapping[str, str]) -> Obj:
    data = dict(zip(KEYS, (pair.ca, pair.cert, pair.key), strict=True))
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def ca_bundle_patch(configuration: Mapping[str, Any], ca: bytes) -> list[dict[str, Any]]:
    """A JSON patch setting each webhook's caBundle to `ca` where it differs ([]: none does);
    each change guarded by the webhook's name at that index."""
    bundle = base64.b64encode(ca).decode()
    ops: list[dict[str, Any]] = []
    for i, hook in enumerate(configuration.get("webhooks") or []):
        if (hook.get("clientConfig") or {}).get("caBundle") != bundle:
            ops += [{"op": "test", "path": f"/webhooks/{i}/name", "value": hook["name"]},
                    {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}]
    return ops


def ensure(kube: Api, namespace: str, secret_name: str, configuration_name: str,
           labels: Mapping[str, str]) -> Pair:
    """The pair in the Secret (made if absent), its CA trusted by the webhook configuration."""
    configuration_path = path(ADMISSION, "mutatingwebhookconfigurations", name=configuration_name)
    configuration = kube.json("GET", configuration_path)
    secret_path = path("v1", "secrets", namespace, secret_name)
    secret = kube.get_or_none(secret_path)
    if secret is None:
        made = make_pair(*serving_names(configuration))
        created = kube._create_new(path("v1", "secrets", namespace),
                                   secret_of(made, namespace, secret_name, labels))
        if created:
            log.info("webhook certificate made", secret=f"{namespace}/{secret_name}")
            secret = secret_of(made, namespace, secret_name, labels)
        else:  # another replica made it first: serve theirs
            secret = kube.get_or_none(secret_path)
            if secret is None:
                raise CertificateError(f"Secret {namespace}/{secret_name} vanished as it was made")
    pair = pair_of(secret)
    if pair is None:
        raise CertificateError(
            f"Secret {namespace}/{secret_name} lacks one of {', '.join(KEYS)}: delete it, and a "
            "new pair is made at the next start")
    patch = ca_bundle_patch(configuration, pair.ca)
    if patch:
        kube.send("PATCH", configuration_path, patch, content_type=JSON_PATCH)
        log.info("webhook configuration trusts the certificate's CA",
                 configuration=configuration_name, webhooks=len(patch) // 2)
    return pair


def write(pair: Pair, cert_file: Path, key_file: Path) -> None:
    """Where the server reads its certificate (the key readable by this user alone)."""
    for file, content in ((cert_file, pair.cert), (key_file, pair.key)):
        file.parent.mkdir(parents=True, exist_ok=True)
        temporary = file.with_name(file.name + ".new")
        temporary.touch(mode=0o600)
        temporary.write_bytes(content)
        temporary.replace(file)
