"""docs/operations/metrics.md's table of metrics, made from the registry itself:
`python -m tests.metrics_doc` rewrites it; tests/test_monitoring.py fails when it is stale."""

from __future__ import annotations

import re
from pathlib import Path

from controller.metrics import Metrics

DOC = Path(__file__).resolve().parent.parent / "docs" / "operations" / "metrics.md"
START, END = "<!-- metrics table: python -m tests.metrics_doc -->", "<!-- end of metrics table -->"


def table() -> str:
    metrics = Metrics()
    # Label names of our own metrics, which a family without children yet does not show.
    declared = {m._name: m._labelnames for m in vars(metrics).values() if hasattr(m, "_labelnames")}
    lines = ["| Metric | Type | Labels | Meaning |", "|---|---|---|---|"]
    for family in sorted(metrics.registry.collect(), key=lambda f: f.name):
        labels = declared.get(family.name) or sorted(
            {key for sample in family.samples for key in sample.labels} - {"le"})
        # as queried: counters with _total; a histogram by its name (_bucket, _sum, _count)
        name = family.name + ("_total" if family.type == "counter" else "")
        meaning = " ".join(family.documentation.split()).replace("|", "\\|")
        lines.append(f"| `{name}` | {family.type} | {', '.join(labels)} | {meaning} |")
    return "\n".join(lines)


def current() -> str:
    text = DOC.read_text()
    found = re.search(re.escape(START) + r"\n(.*?)\n" + re.escape(END), text, re.S)
    return found.group(1) if found else ""


def main() -> None:
    text = DOC.read_text()
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    DOC.write_text(f"{before}{START}\n{table()}\n{END}{after}")


if __name__ == "__main__":
    main()
