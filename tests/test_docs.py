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
