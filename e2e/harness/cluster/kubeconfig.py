"""Kubeconfig files for the local control plane (client-certificate auth)."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_kubeconfig(
    path: Path, *, server: str, ca: Path, client_cert: Path, client_key: Path, name: str = "e2e"
) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {
                "name": name,
                "user": {"client-certificate": str(client_cert), "client-key": str(client_key)},
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
