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


# The modules of controller/operator/ that may make a lock (none may be added): the run memory
# alone. The indexes the watches fill (kube/podindex.py, kube/nodeindex.py) hold theirs in kube/.
LOCKED = {"memory.py"}
# operator/ is the snapshot, the executor and thin adapters: at most this many modules.
MOST_OPERATOR_MODULES = 12


def test_no_module_of_the_operator_but_those_listed_holds_a_lock() -> None:
    making = re.compile(r"\b(Lock|RLock|Condition|Semaphore|BoundedSemaphore)\(")
    locked = {path.name for path in sorted((CONTROLLER / "operator").glob("*.py"))
              if making.search(path.read_text())}
    assert locked <= LOCKED


def test_the_operator_is_at_most_twelve_modules() -> None:
    modules = sorted(path.name for path in (CONTROLLER / "operator").glob("*.py")
                     if path.name != "__init__.py")
    assert len(modules) <= MOST_OPERATOR_MODULES, modules
