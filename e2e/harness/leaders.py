"""Who led when, read back from the replicas' own log lines: did two leaders ever act at once,
and how long was there no leader?

The reconciler logs `leading` (with its Lease identity) when it takes the Lease, `leadership
lost` / `leadership released` when it stops, and `api write` (with the holder it acts as) as it
sends each write (controller/kube/connection.py). All replicas run on this host, so their
timestamps share one clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

LEADING, WRITE = "leading", "api write"
ENDS = frozenset({"leadership lost", "leadership released", "waiting for leadership"})


@dataclass(frozen=True)
class Line:
    at: float  # seconds since the epoch
    event: str
    who: str | None  # the identity that took the Lease, or the holder a write acts as
    what: str = ""  # a write's verb and resource: "create statefulsets"
    unfenced: bool = False  # a write made without the Lease by design (kube/fencing.py)


def entries(path: Path) -> Iterator[dict[str, Any]]:
    """Every JSON line of one process's log; other output is skipped."""
    for raw in path.read_text(errors="replace").splitlines():
        if not raw.startswith("{"):
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict) and "timestamp" in entry:
            yield entry


def stamp(entry: dict[str, Any]) -> float:
    """A line's time, in seconds since the epoch."""
    return datetime.fromisoformat(str(entry["timestamp"]).replace("Z", "+00:00")).timestamp()


def read(path: Path) -> list[Line]:
    """The lines of one replica's log that tell who leads; other lines (and non-JSON output)
    are skipped."""
    lines = []
    for entry in entries(path):
        event = entry.get("event")
        if event in (LEADING, WRITE) or event in ENDS:
            what = f"{entry.get('verb')} {entry.get('resource')}" if event == WRITE else ""
            lines.append(Line(stamp(entry), event, entry.get("identity") or entry.get("holder"),
                              what, bool(entry.get("unfenced"))))
    return lines


def acting_spans(lines: Iterable[Line]) -> dict[str, tuple[float, float]]:
    """Each holder's span of action: from taking the Lease to its last write."""
    spans: dict[str, tuple[float, float]] = {}
    for line in sorted(lines, key=lambda x: x.at):
        if line.who is None:
            continue
        if line.event == LEADING:
            spans.setdefault(line.who, (line.at, line.at))
        elif line.event == WRITE:
            start, _ = spans.get(line.who, (line.at, line.at))
            spans[line.who] = (start, line.at)
    return spans


def overlapping_leaders(lines: Iterable[Line]) -> list[tuple[str, str]]:
    """Pairs of holders whose spans of action intersect: two leaders acting at once."""
    spans = sorted(acting_spans(lines).items(), key=lambda kv: kv[1][0])
    return [
        (a, b)
        for i, (a, (_, a_end)) in enumerate(spans)
        for b, (b_start, _) in spans[i + 1 :]
        if b_start <= a_end
    ]


def unheld_writes(lines: Iterable[Line]) -> int:
    """Writes sent by no holder: a reconciler acting without the Lease. The gates handed back
    as leading ends go without it by design, and say so: not counted."""
    return sum(1 for x in lines if x.event == WRITE and x.who is None and not x.unfenced)


def leading_spans(logs: Sequence[tuple[list[Line], float | None]]) -> list[tuple[float, float]]:
    """When some replica led: per log (one process's lines, and when it was killed if it was),
    from each `leading` to the next line that ends it, the kill, or the log's last line."""
    spans = []
    for lines, killed in logs:
        ordered = sorted(lines, key=lambda x: x.at)
        last = ordered[-1].at if ordered else 0.0
        for i, line in enumerate(ordered):
            if line.event != LEADING:
                continue
            end = next((x.at for x in ordered[i + 1 :] if x.event in ENDS), None)
            if end is None:
                end = killed if killed is not None else last
            spans.append((line.at, end))
    return spans


def longest_gap(
    spans: Iterable[tuple[float, float]], start: float, end: float,
    excused: Iterable[tuple[float, float]] = (),
) -> float:
    """The longest stretch of [start, end] that no span covers, not counting the excused
    stretches (the API server down: no replica can lead without it)."""
    covered = sorted([*spans, *excused])
    gap, reach = 0.0, start
    for s, e in covered:
        if s > reach:
            gap = max(gap, min(s, end) - reach)
        reach = max(reach, e)
        if reach >= end:
            break
    return max(gap, end - reach)


def of_logs(paths: Iterable[Path]) -> list[Line]:
    """The lines of several processes' logs (a replica's successive processes), oldest first."""
    return sorted((x for p in paths for x in read(p)), key=lambda x: x.at)


def first_leading(lines: Iterable[Line], after: float = 0.0) -> Line | None:
    """The first `leading` line after `after`."""
    return next((x for x in lines if x.event == LEADING and x.at > after), None)


def writes(lines: Iterable[Line], start: float, end: float = float("inf"),
           who: str | None = "") -> list[Line]:
    """The writes logged in (start, end) by holder `who` ("": whoever, None: no holder)."""
    return [x for x in lines if x.event == WRITE and start < x.at < end
            and (who == "" or x.who == who)]


def counted(lines: Iterable[Line]) -> str:
    """Writes counted by what they were: `1 patch pipelineruns, 3 create statefulsets`."""
    counts: dict[str, int] = {}
    for x in lines:
        counts[x.what] = counts.get(x.what, 0) + 1
    return ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
