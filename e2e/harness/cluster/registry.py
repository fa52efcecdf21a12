"""The lab's registry: distribution's (e2e/build.sh registry), the one place real nodes pull from.

It serves on the lab's own address (realhost.API_ADDRESS, on the harness's bridge), with TLS
(a certificate of the cluster's CA: containerd, skopeo and the harness trust that CA alone; a
registry of users' is HTTPS too, and plain HTTP would also lose basic auth's one protection)
and htpasswd authentication, with a user and password made anew for each lab: a pull without
the lab's pull secret is refused.

Its storage is a cache shared between sessions (like buildah's store), so that images pushed
once are not pushed again: the project's image alone is several hundred MB, compressed anew by
every push. A push is skipped when the same archive was pushed under the same name before and
the registry still has it. Tags of the project's image other than the current one are dropped
before the registry starts, and their blobs collected, so the cache holds one project image.

Each image keeps the name users' manifests give it; in the registry it is stored under that
whole name (registry.k8s.io/pause:3.10 as the repository registry.k8s.io/pause), and each
node's containerd maps the name's registry host to that path (realconfig.mirror).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tarfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
import yaml
from cryptography.hazmat.primitives import serialization

from .pki import Pki, issue_cert, load_ca
from .processes import ManagedProcess, wait_until
from .realhost import API_ADDRESS
from .versions import cache_dir, find_binary

MANIFESTS = ", ".join([
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str

    @property
    def auth(self) -> str:
        """As a docker config's `auth`, and as HTTP basic auth sends it."""
        return base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


def local_env(**extra: str) -> dict[str, str]:
    """The environment without proxy settings: what the lab's parts say to each other goes
    straight there, never through a proxy beyond the machine."""
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    return {**env, **extra}


# Traces are exported nowhere: unset, OpenTelemetry's autoexport (in the registry) sends them
# to an OTLP collector on localhost:4318.
_NO_TELEMETRY = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}


def free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def repository(name: str) -> tuple[str, str]:
    """registry.k8s.io/pause:3.10 -> (registry.k8s.io/pause, 3.10)."""
    path, _, tag = name.rpartition(":")
    if not path or "/" in tag:
        raise ValueError(f"{name}: a name with a tag is expected")
    return path, tag


class LabRegistry:
    """The registry process, its credentials and what was pushed into it."""

    def __init__(self, run_dir: Path, logs_dir: Path, root: Path | None = None) -> None:
        self.dir = run_dir / "registry"
        self.logs_dir = logs_dir
        self.root = root or cache_dir() / "registry"
        self.storage = self.root / "storage"
        self.credentials = Credentials(f"lab-{secrets.token_hex(4)}", secrets.token_urlsafe(24))
        self.port = 0
        self.process: ManagedProcess | None = None

    @property
    def host(self) -> str:
        return f"{API_ADDRESS}:{self.port}"

    @property
    def ca(self) -> Path:
        """The CA that signed the registry's certificate: what its clients trust."""
        return self.dir / "certs.d" / "ca.crt"

    # -- start and stop -----------------------------------------------------------------

    def start(self, pki: Pki, keep: Mapping[str, str] | None = None) -> None:
        """Serves on the lab's address (its bridge must be up). `keep`: repository -> the one
        tag of it to keep (the others are dropped and their blobs collected first)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca.parent.mkdir(exist_ok=True)
        shutil.copyfile(pki.ca_cert, self.ca)
        ca_cert, ca_key = load_ca(pki)
        cert, key = issue_cert(ca_cert, ca_key, "lab-registry", server=True, ips=(API_ADDRESS,))
        (self.dir / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path = self.dir / "tls.key"
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        key_path.chmod(0o600)
        # The lowest bcrypt cost: the registry checks the password on every request, and a
        # pull is many requests (a cost of 12 is a quarter of a second of CPU each, here).
        hashed = bcrypt.hashpw(self.credentials.password.encode(), bcrypt.gensalt(rounds=4))
        htpasswd = self.dir / "htpasswd"
        htpasswd.write_text(f"{self.credentials.username}:{hashed.decode()}\n")
        htpasswd.chmod(0o600)
        self.port = free_port(API_ADDRESS)
        config = self.dir / "config.yml"
        config.write_text(yaml.safe_dump(self._config(htpasswd)))
        if keep and self._drop_tags(keep):
            self._registry("garbage-collect", "--delete-untagged", str(config))
        self.process = ManagedProcess("registry", [str(find_binary("registry")), "serve",
                                                   str(config)],
                                      self.logs_dir / "registry.log",
                                      env=local_env(**_NO_TELEMETRY))
        self.process.start()
        wait_until(lambda: self._status("GET", "/v2/") == 200, timeout=30,
                   what="the lab's registry answering", process=self.process)
        if self._status("GET", "/v2/", auth=False) != 401:
            raise RuntimeError("the lab's registry answers without credentials")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def _config(self, htpasswd: Path) -> dict[str, Any]:
        self.storage.mkdir(parents=True, exist_ok=True)
        return {
            "version": 0.1,
            "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": False}},
            "storage": {"filesystem": {"rootdirectory": str(self.storage)},
                        "delete": {"enabled": True},
                        # Uploads left half done by a session that died: nothing to purge on a
                        # timer in a process that lives minutes.
                        "maintenance": {"uploadpurging": {"enabled": False}}},
            "http": {"addr": self.host, "tls": {"certificate": str(self.dir / "tls.crt"),
                                                "key": str(self.dir / "tls.key")}},
            "auth": {"htpasswd": {"realm": "lab-registry", "path": str(htpasswd)}},
        }

    def _registry(self, *args: str) -> None:
        out = subprocess.run([str(find_binary("registry")), *args], capture_output=True,
                             text=True, timeout=300, env=local_env(**_NO_TELEMETRY))
        if out.returncode != 0:
            raise RuntimeError(f"registry {' '.join(args)} failed: {out.stderr[-2000:]}")

    def _drop_tags(self, keep: Mapping[str, str]) -> bool:
        dropped = False
        for path, tag in keep.items():
            tags = self.storage / "docker/registry/v2/repositories" / path / "_manifests/tags"
            for old in tags.iterdir() if tags.is_dir() else ():
                if old.name != tag:
                    shutil.rmtree(old)
                    dropped = True
        return dropped

    # -- HTTP ---------------------------------------------------------------------------

    def _request(self, method: str, path: str, auth: bool = True,
                 accept: str = MANIFESTS) -> tuple[int, bytes]:
        request = urllib.request.Request(f"https://{self.host}{path}", method=method,
                                         headers={"Accept": accept})
        if auth:
            request.add_header("Authorization", f"Basic {self.credentials.auth}")
        opener = urllib.request.build_opener(  # no proxy, whatever the environment says
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=str(self.ca))))
        try:
            with opener.open(request, timeout=10) as resp:
                return int(resp.status), bytes(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, b""

    def _status(self, method: str, path: str, auth: bool = True) -> int:
        with contextlib.suppress(OSError):
            return self._request(method, path, auth)[0]
        return 0

    def manifest(self, name: str) -> bytes | None:
        path, tag = repository(name)
        status, body = self._request("GET", f"/v2/{path}/manifests/{tag}")
        if status == 404:
            return None
        if status != 200:
            raise RuntimeError(f"the lab's registry answered {status} for {name}")
        return body

    def config(self, name: str) -> dict[str, Any]:
        """The image's config: its rootfs diff_ids key the snapshots a node unpacks it into."""
        body = self.manifest(name)
        if body is None:
            raise LookupError(f"{name} is not in the lab's registry")
        path, _ = repository(name)
        digest = json.loads(body)["config"]["digest"]
        status, blob = self._request("GET", f"/v2/{path}/blobs/{digest}", accept="*/*")
        if status != 200:
            raise RuntimeError(f"the lab's registry answered {status} for {name}'s config")
        config: dict[str, Any] = json.loads(blob)
        return config

    def size(self, name: str) -> int:
        """The bytes a node fetches for the image: its manifest, config and compressed layers
        (what containerd, and so the kubelet, calls the image's size)."""
        body = self.manifest(name)
        if body is None:
            raise LookupError(f"{name} is not in the lab's registry")
        manifest = json.loads(body)
        blobs = [manifest["config"], *manifest["layers"]]
        return len(body) + sum(int(blob["size"]) for blob in blobs)

    # -- push ---------------------------------------------------------------------------

    def push(self, archive: Path, name: str) -> bool:
        """The image in an OCI or docker archive, into the registry under `name`, layers
        compressed (gzip) as users' registries hold them; False when it already was."""
        stat = archive.stat()
        stamp = self.root / "pushed" / hashlib.sha256(
            f"{name}\0{archive.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()
        ).hexdigest()
        if stamp.exists() and self.manifest(name) is not None:
            return False
        with tarfile.open(archive) as tar:
            kind = "oci-archive" if "oci-layout" in tar.getnames() else "docker-archive"
        creds = f"{self.credentials.username}:{self.credentials.password}"
        # --insecure-policy: the source is an archive built here, not a signed image.
        out = subprocess.run(["skopeo", "--insecure-policy", "copy", "--quiet",
                              "--dest-creds", creds, "--dest-cert-dir", str(self.ca.parent),
                              f"{kind}:{archive}", f"docker://{self.host}/{name}"],
                             capture_output=True, text=True, timeout=900, env=local_env())
        if out.returncode != 0:
            raise RuntimeError(f"skopeo copy of {archive} to {name} failed: {out.stderr[-2000:]}")
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(f"{name}\n{archive}\n")
        return True

    def docker_config(self, registries: tuple[str, ...]) -> dict[str, Any]:
        """A docker config with the lab's credentials for each registry host (the names the
        kubelet matches images with; containerd sends them on to the lab's registry)."""
        entry = {"username": self.credentials.username, "password": self.credentials.password,
                 "auth": self.credentials.auth}
        return {"auths": {host: entry for host in registries}}
