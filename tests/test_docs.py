"""The README's settings table and the Settings model cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

from controller.settings import ENV_PREFIX, Settings

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_lists_every_setting_and_no_other() -> None:
    documented = set(re.findall(r"^\| `(COSCHEDULER_[A-Z_]+)` \|", README.read_text(), re.M))
    expected = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    assert documented == expected, (
        f"missing from README: {sorted(expected - documented)}; "
        f"not settings: {sorted(documented - expected)}"
    )


def test_the_architecture_map_names_every_module() -> None:
    """docs/architecture.md is the newcomer's map: a module it does not name is a room missing
    from it."""
    doc = (README.parent / "docs" / "architecture.md").read_text()
    package = README.parent / "controller"
    missing = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py") and path.name not in doc
    ]
    assert not missing, f"docs/architecture.md does not name {missing}"
