"""The chart's values table, generated from values.yaml's comments.

python -m e2e.tools.chart_readme          # rewrites the table in the chart's README and the
                                          # descriptions in values.schema.json
python -m e2e.tools.chart_readme --check  # exit 1, saying what differs, when either is stale

One source: the comment lines right above a key of values.yaml describe it. A key without a
comment (the image and metrics blocks keep theirs short) takes the description written in
values.schema.json; every key needs one or the other. Each comment then becomes the key's
description in the schema too, so that editors reading the schema and readers of values.yaml
see the same words.

A row is made for every key of values.yaml down to the schema's leaves: an object whose
schema lists its properties (config, webhook.tls, ...) is walked into; one whose schema does
not (podSecurityContext, affinity, nodeSelector: Kubernetes' own types, or free maps) is one
row with its whole default. Only the table between the README's markers is generated; the
rest of the README is written by hand.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "tekton-coscheduler"
START, END = "<!-- values:start -->", "<!-- values:end -->"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+|\"[^\"]+\"):(?:\s|$)")


class ChartDocsError(Exception):
    """values.yaml, the schema or the README is not in a shape the generator can document."""


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    description: str


def comments(values_yaml: str) -> dict[str, str]:
    """Dotted key -> the comment lines right above it, joined (keys without one are absent)."""
    found: dict[str, str] = {}
    parents: list[tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    pending: list[str] = []
    for line in values_yaml.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        match = KEY.match(line)
        if not match:  # a blank line, a list item or a continuation: no comment carries over
            pending = []
            continue
        indent, key = len(match["indent"]), match["key"].strip('"')
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = ".".join([*(k for _, k in parents), key])
        if pending:
            found[path] = " ".join(p for p in pending if p)
        pending = []
        parents.append((indent, key))
    return found


def _type_of(schema: dict[str, Any], value: Any) -> str:
    if "type" in schema:
        kind = schema["type"]
        return " or ".join(kind) if isinstance(kind, list) else str(kind)
    if "anyOf" in schema:
        kinds = dict.fromkeys(str(s.get("type", "")) for s in schema["anyOf"])
        return " or ".join(k for k in kinds if k)
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), "any")


def rows(values: dict[str, Any], schema: dict[str, Any], described: dict[str, str]) -> list[Row]:
    """Every key of `values` down to the schema's leaves, in the file's order."""
    out: list[Row] = []
    missing: list[str] = []

    def walk(node: dict[str, Any], props: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = prefix + key
            sub = props.get(key, {})
            description = described.get(path) or sub.get("description", "")
            if not description:
                missing.append(path)
            walk_in = isinstance(value, dict) and value and "properties" in sub
            default = "" if walk_in else f"`{json.dumps(value, separators=(', ', ': '))}`"
            out.append(Row(path, _type_of(sub, value), default, description))
            if walk_in:
                walk(value, sub["properties"], path + ".")

    walk(values, schema.get("properties", {}), "")
    if missing:
        raise ChartDocsError(
            "no description (a comment above it in values.yaml, or one in values.schema.json) "
            f"for: {', '.join(missing)}")
    return out


def table(found: list[Row]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    lines += [f"| `{r.key}` | {r.type} | {cell(r.default)} | {cell(r.description)} |"
              for r in found]
    return "\n".join(lines)


def with_descriptions(schema: dict[str, Any], values: dict[str, Any],
                      described: dict[str, str]) -> dict[str, Any]:
    """The schema with each key's comment of values.yaml as its description (first, for
    readers of the file); other descriptions as written."""
    def walk(node: dict[str, Any], props: dict[str, Any], prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, sub in props.items():
            path = prefix + key
            value = node.get(key) if isinstance(node, dict) else None
            if "properties" in sub:
                sub = {**sub, "properties": walk(value or {}, sub["properties"], path + ".")}
            if path in described:
                sub = {"description": described[path],
                       **{k: v for k, v in sub.items() if k != "description"}}
            out[key] = sub
        return out

    return {**schema, "properties": walk(values, schema.get("properties", {}), "")}


def undescribed(schema: dict[str, Any], path: str = "") -> list[str]:
    """Every property of the schema, at any depth (array items included), lacking a description."""
    out: list[str] = []
    for key, sub in schema.get("properties", {}).items():
        here = f"{path}.{key}" if path else key
        if not sub.get("description"):
            out.append(here)
        out += undescribed(sub, here)
    for nested in ("items", "additionalProperties"):
        if isinstance(schema.get(nested), dict):
            out += undescribed(schema[nested], f"{path}[]" if nested == "items" else f"{path}.*")
    for i, alternative in enumerate(schema.get("anyOf", [])):
        out += undescribed(alternative, f"{path}|{i}")
    return out


def generate(chart: Path = CHART) -> dict[Path, str]:
    """What the README and the schema should hold: path -> text."""
    values_text = (chart / "values.yaml").read_text()
    values = yaml.safe_load(values_text)
    schema_path, readme_path = chart / "values.schema.json", chart / "README.md"
    described = comments(values_text)
    schema = with_descriptions(json.loads(schema_path.read_text()), values, described)
    readme = readme_path.read_text()
    if readme.count(START) != 1 or readme.count(END) != 1:
        raise ChartDocsError(f"{readme_path} needs one {START} and one {END} line")
    head, rest = readme.split(START)
    tail = rest.split(END)[1]
    body = table(rows(values, schema, described))
    return {readme_path: f"{head}{START}\n{body}\n{END}{tail}",
            schema_path: json.dumps(schema, indent=2) + "\n"}


def stale(chart: Path = CHART) -> list[str]:
    """A diff for each file that is not what generate() makes ([] when both are)."""
    out = []
    for path, text in generate(chart).items():
        have = path.read_text()
        if have != text:
            diff = difflib.unified_diff(have.splitlines(), text.splitlines(), str(path),
                                        "generated", lineterm="", n=1)
            out.append("\n".join(diff))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a file is stale")
    parser.add_argument("--chart", type=Path, default=CHART)
    args = parser.parse_args(argv)
    try:
        if args.check:
            diffs = stale(args.chart)
            for diff in diffs:
                print(diff)
            if diffs:
                print("stale: run `python -m e2e.tools.chart_readme`", file=sys.stderr)
            return 1 if diffs else 0
        for path, text in generate(args.chart).items():
            path.write_text(text)
    except ChartDocsError as e:
        print(f"chart_readme: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
