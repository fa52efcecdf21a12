"""structlog for our own lines, and kopf's stdlib records rendered the same way.

Our lines do not go through the standard library: a record built, handled and formatted by
`logging` cost about 0.1 ms of the leader's CPU, and the leader logs every write it sends (the
chaos benchmark reads those lines) and every pod admission ties (bench-scale at 1,000 runs:
9% of the leader's busy samples in logging). They are filtered by level before anything is
built (`make_filtering_bound_logger`), rendered by orjson, and written as bytes, one line at a
time under structlog's lock. kopf logs through `logging`; its records get the same fields.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog


def _object_ref(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """kopf attaches the object it logs about as `k8s_ref`; flatten it to `object`."""
    ref = event.pop("k8s_ref", None)
    if isinstance(ref, dict):
        ns, name, kind = ref.get("namespace"), ref.get("name"), ref.get("kind")
        event.setdefault("object", f"{kind}/{ns + '/' if ns else ''}{name}")
    return event


def _dumps(obj: Any, default: Any = None, **_: Any) -> bytes:
    return orjson.dumps(obj, default=default)


def configure(level: str = "INFO", fmt: str = "json", stream: TextIO | None = None) -> None:
    out = stream or sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    console = fmt != "json"
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=out.isatty()) if console
        else structlog.processors.JSONRenderer(serializer=_dumps)
    )

    def logger(name: str = "", *_: Any) -> Any:
        """Our lines' logger; `name`, the module it logs for, is what add_logger_name reads."""
        made: Any = structlog.PrintLogger(out) if console else structlog.BytesLogger(out.buffer)
        made.name = name
        return made

    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level]),
        logger_factory=logger,
        cache_logger_on_first_use=True,
    )
    foreign: list[Any] = [*shared, structlog.stdlib.ExtraAdder(allow=["k8s_ref"]), _object_ref]
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=foreign,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.dev.ConsoleRenderer(colors=out.isatty()) if console
                else structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The access log of the webhook server would drown every other line.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
