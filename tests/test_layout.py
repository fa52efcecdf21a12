"""The product's code stays readable in one sitting: no module of controller/ over 300 lines
(a longer one has more than one subject: split it where a reader would look for each)."""

from __future__ import annotations

from pathlib import Path

CONTROLLER = Path(__file__).resolve().parents[1] / "controller"
MOST = 300


def test_no_module_of_the_product_is_over_300_lines() -> None:
    long = {str(path.relative_to(CONTROLLER)): n for path in sorted(CONTROLLER.rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > MOST}
    assert long == {}
