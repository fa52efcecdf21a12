"""Every benchmark and tool a make target runs imports: none runs in CI, so a name moved from
under one went unseen (bench/capacity.py imported `_save` from bench.scale after it had moved to
bench.scale_report; `make bench-capacity` failed at its first line)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for folder in ("bench", "e2e/tools")
    for path in (ROOT / folder).glob("*.py")
    if path.name != "__init__.py"
)


@pytest.mark.parametrize("module", MODULES)
def test_it_imports(module: str) -> None:
    importlib.import_module(module)
