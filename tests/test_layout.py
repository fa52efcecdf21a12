"""The product's code stays readable in one sitting: no module of controller/ over 300 lines
(a longer one has more than one subject: split it where a reader would look for each); and few
modules of operator/ hold a lock (state of a run is its memory, work on one key is the work
queue's: issue 47)."""

from __future__ import annotations

import re
from pathlib import Path

CONTROLLER = Path(__file__).resolve().parents[1] / "controller"
MOST = 300


def test_no_module_of_the_product_is_over_300_lines() -> None:
    long = {str(path.relative_to(CONTROLLER)): n for path in sorted(CONTROLLER.rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > MOST}
    assert long == {}


# The modules of controller/operator/ that may make a lock (none may be added; each one that
# gives its own up leaves this list).
LOCKED = {"memory.py", "podindex.py", "nodes.py"}


def test_no_module_of_the_operator_but_those_listed_holds_a_lock() -> None:
    making = re.compile(r"\b(Lock|RLock|Condition|Semaphore|BoundedSemaphore)\(")
    locked = {path.name for path in sorted((CONTROLLER / "operator").glob("*.py"))
              if making.search(path.read_text())}
    assert locked <= LOCKED
