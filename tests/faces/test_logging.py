"""The operator's log lines: ours and kopf's, one JSON object a line with the same fields."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from controller.faces.logging import configure


@pytest.fixture
def lines() -> Iterator[io.BytesIO]:
    raw = io.BytesIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure("INFO", "json", io.TextIOWrapper(raw, write_through=True))
    yield raw
    structlog.reset_defaults()
    root.handlers[:], root.level = handlers, level


def test_our_lines_and_kopf_s_records_are_json_lines_with_the_same_fields(
        lines: io.BytesIO) -> None:
    ours = structlog.get_logger("controller.kube.connection")
    ours.info("api write", verb="create", holder="replica-a")
    ours.debug("not at INFO")
    logging.getLogger("kopf.objects").info(
        "Handler succeeded", extra={"k8s_ref": {"kind": "Node", "name": "n1"}})
    logging.getLogger("kopf.objects").debug("not at INFO either")
    try:
        raise ZeroDivisionError("boom")
    except ZeroDivisionError:
        structlog.get_logger("controller.faces.reconciler").exception("kopf stopped")
    said = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [s["event"] for s in said] == ["api write", "Handler succeeded", "kopf stopped"]
    write, kopf, failed = said
    assert (write["logger"], write["level"], write["verb"], write["holder"]) == (
        "controller.kube.connection", "info", "create", "replica-a")
    assert write["timestamp"].endswith("Z") and kopf["timestamp"].endswith("Z")
    assert (kopf["logger"], kopf["level"], kopf["object"]) == ("kopf.objects", "info", "Node/n1")
    assert failed["level"] == "error" and "ZeroDivisionError: boom" in failed["exception"]
