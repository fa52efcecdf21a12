"""CI's e2e session fails on a skip outside the files allowed to skip (e2e/harness/skips.py):
a real-node scenario skipped for want of root or containers would otherwise pass CI unseen."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SCENARIOS = {
    "test_real.py": "import pytest\n\ndef test_on_real_nodes():\n    pytest.skip('no root')\n",
    "test_kind.py": "import pytest\n\ndef test_on_kind():\n    pytest.skip('no Docker')\n",
    "test_plain.py": "def test_runs():\n    assert True\n",
}


@pytest.fixture(autouse=True)
def scenarios(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    pytester.makepyfile(**{name[:-3]: text for name, text in SCENARIOS.items()})


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "e2e.harness.skips", "-p", "no:cacheprovider",
                                         *args)


def test_a_skip_outside_the_allowed_files_fails_the_session_and_is_named(
        pytester: pytest.Pytester) -> None:
    result = run(pytester, "--skips-allowed", "test_kind.py")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skipped where no skip is allowed*",
                                 "*test_real.py::test_on_real_nodes*no root*"])
    assert "test_on_kind" not in result.stdout.str().split("no skip is allowed")[1]


def test_skips_only_in_allowed_files_pass(pytester: pytest.Pytester) -> None:
    assert run(pytester, "--skips-allowed", "test_kind.py,test_real.py").ret == pytest.ExitCode.OK


def test_without_the_option_a_skip_is_a_skip(pytester: pytest.Pytester) -> None:
    assert run(pytester).ret == pytest.ExitCode.OK


def test_a_failure_stays_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad="def test_bad():\n    assert False\n")
    assert run(pytester, "--skips-allowed", "").ret == pytest.ExitCode.TESTS_FAILED
