"""structlog for our own lines, and kopf's stdlib records routed through the same pipeline."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog


def _object_ref(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """kopf attaches the object it logs about as `k8s_ref`; flatten it to `object`."""
    ref = event.pop("k8s_ref", None)
    if isinstance(ref, dict):
        ns, name, kind = ref.get("namespace"), ref.get("name"), ref.get("kind")
        event.setdefault("object", f"{kind}/{ns + '/' if ns else ''}{name}")
    return event


def configure(level: str = "INFO", fmt: str = "json") -> None:
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.stdlib.ExtraAdder(allow=["k8s_ref"]),
        _object_ref,
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            *[p for p in shared if not isinstance(p, structlog.stdlib.ExtraAdder)],
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The access log of the webhook server would drown every other line.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
