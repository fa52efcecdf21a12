"""The webhook server alone, with a fixed cluster view: what bench/admission.py measures.

python -m bench.webhook_server CERT KEY PORT
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from controller.faces import webhook
from controller.faces.logging import configure
from controller.metrics import Metrics


@dataclass(frozen=True)
class FixedFacts:
    synced: bool = True
    assistant_blocks: bool = False

    def namespace_enabled(self, namespace: str) -> bool:
        return namespace == "team-a"

    def topology_key(self, namespace: str) -> str:
        return "kubernetes.io/hostname"


def main() -> None:
    cert, key, port = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    configure("INFO", "json")  # as in production: one JSON line per patched pod
    tls = webhook.ReloadingTLS(cert, key)
    facts = FixedFacts()
    web.run_app(
        webhook.make_app(lambda: facts, Metrics()),
        host="127.0.0.1",
        port=port,
        ssl_context=tls.context,
        access_log=None,
        print=None,
    )


if __name__ == "__main__":
    main()
