"""For CI: a scenario that skipped proved nothing, so a skip fails the session unless its test
file is one `--skips-allowed` names (a scenario this machine cannot run by design, such as the
kind backend's without Docker). Without the option, skips are skips.

e2e/tests/conftest.py hands its hooks here (`pytest e2e --skips-allowed test_kind_install.py`):
a plugin given with `-p` is imported before the repository is on the import path. Loaded alone
(`-p e2e.harness.skips`, the repository on PYTHONPATH), the module is the same plugin.
"""

from __future__ import annotations

import pytest


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        "--skips-allowed", default=None, metavar="FILES",
        help="comma-separated test files whose scenarios may skip; a skip anywhere else fails "
             "the session",
    )


def unexpected(config: pytest.Config, skipped: list[pytest.TestReport]) -> list[str]:
    """Each skipped scenario outside the allowed files, with its reason (none without the
    option)."""
    allowed = config.getoption("--skips-allowed")
    if allowed is None:
        return []
    files = {f.strip() for f in allowed.split(",") if f.strip()}
    said = []
    for report in skipped:
        if report.nodeid.split("::")[0].rsplit("/", 1)[-1] not in files:
            reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else ""
            said.append(f"{report.nodeid}: {reason}")
    return said


def _skipped(config: pytest.Config) -> list[pytest.TestReport]:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    return list(reporter.stats.get("skipped", [])) if reporter else []


def report(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if said := unexpected(config, _skipped(config)):
        terminalreporter.write_line(
            "skipped where no skip is allowed (--skips-allowed), so the session fails:\n  "
            + "\n  ".join(said), red=True)


def finish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.OK and unexpected(session.config, _skipped(session.config)):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# The same, as a plugin of its own.
pytest_addoption = add_option
pytest_terminal_summary = report
pytest_sessionfinish = pytest.hookimpl(trylast=True)(finish)
