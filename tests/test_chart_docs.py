"""The chart's README table and schema descriptions are what values.yaml's comments make
(e2e/tools/chart_readme.py): CI fails on a value documented nowhere or a stale table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from e2e.tools import chart_readme


def test_the_committed_readme_and_schema_are_what_the_generator_makes() -> None:
    diffs = chart_readme.stale()
    assert diffs == [], "stale; run `python -m e2e.tools.chart_readme`:\n" + "\n".join(diffs)


def test_every_property_of_the_schema_is_described() -> None:
    schema = json.loads((chart_readme.CHART / "values.schema.json").read_text())
    assert chart_readme.undescribed(schema) == []


@pytest.fixture
def chart_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "chart"
    shutil.copytree(chart_readme.CHART, copy)
    return copy


def test_a_new_value_makes_the_committed_files_stale(chart_copy: Path) -> None:
    values = chart_copy / "values.yaml"
    values.write_text(values.read_text().replace(
        "replicaCount: 2\n", "replicaCount: 2\n# How many to keep.\nkeep: 3\n"))
    schema = json.loads((chart_copy / "values.schema.json").read_text())
    schema["properties"]["keep"] = {"type": "integer"}
    (chart_copy / "values.schema.json").write_text(json.dumps(schema, indent=2) + "\n")
    stale = chart_readme.stale(chart_copy)
    assert len(stale) == 2  # the README lacks the row, the schema the description
    assert "| `keep` | integer | `3` | How many to keep. |" in stale[0]
    assert chart_readme.main(["--check", "--chart", str(chart_copy)]) == 1
    assert chart_readme.main(["--chart", str(chart_copy)]) == 0  # regenerated
    assert chart_readme.stale(chart_copy) == []


def test_a_value_described_nowhere_is_refused_by_name(chart_copy: Path) -> None:
    values = chart_copy / "values.yaml"
    values.write_text(values.read_text() + "\nundocumented: true\n")
    with pytest.raises(chart_readme.ChartDocsError, match="undocumented"):
        chart_readme.generate(chart_copy)
    assert chart_readme.main(["--check", "--chart", str(chart_copy)]) == 2


def test_comments_belong_to_the_key_right_below_them() -> None:
    text = """# The first.
a: 1

# A section's comment, then a blank line: not b's.

b:
  # Nested,
  # on two lines.
  c:
    d: x  # trailing comments are not read
  e: [1]
  # after a list
f: {}
"""
    assert chart_readme.comments(text) == {"a": "The first.", "b.c": "Nested, on two lines.",
                                           "f": "after a list"}


def test_rows_walk_into_objects_the_schema_lists_and_stop_at_free_ones() -> None:
    schema = {"properties": {
        "resources": {"description": "r", "type": "object",
                      "properties": {"cpu": {"type": "string", "description": "c"}}},
        "podSecurityContext": {"type": "object", "description": "p"},
        "mode": {"anyOf": [{"type": "integer"}, {"type": "string"}], "description": "m"}}}
    values = {"resources": {"cpu": "1"}, "podSecurityContext": {"runAsNonRoot": True}, "mode": 1}
    rows = chart_readme.rows(values, schema, {"mode": "from the comment"})
    assert rows == [
        chart_readme.Row("resources", "object", "", "r"),
        chart_readme.Row("resources.cpu", "string", '`"1"`', "c"),
        chart_readme.Row("podSecurityContext", "object", '`{"runAsNonRoot": true}`', "p"),
        chart_readme.Row("mode", "integer or string", "`1`", "from the comment"),
    ]
    assert chart_readme.table(rows).splitlines()[-1] == "| `mode` | integer or string | `1` | from the comment |"
