"""A glance at a watch event's raw line, before it is decoded: whose it may be.

Most PipelineRun and TaskRun-pod events of a cluster are of namespaces that did not opt in, and
decoding their JSON was most of what they cost the leader (docs/benchmarks.md). A glance reads the
few fields that tell whether an event may concern us by searching its bytes (about a quarter
of what decoding a pod's event costs), and the rest is dropped undecoded.

A glance may say "maybe" of an event that is not ours (it is decoded, and the exact test drops
it); it must never say "no" of one that is. So it collects every `"namespace":"…"` and every uid
the line holds, not only the object's own: a run's ownerReferences, or a label that happens to
be called `namespace`, only add candidates. A quote inside a JSON string is escaped (`\\"`), so
annotation values (JSON in a string, as kubectl's last-applied) cannot pose as fields; names
and uids hold no quote, so the value ends at the next one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

_NAMESPACE = b'"namespace":"'
_UIDS = (b'"uid":"', b'"tekton.dev/pipelineRunUID":"')
# The object's own resourceVersion is its metadata's, which precedes spec and status; the API
# server writes built-in kinds in field order (uid, then resourceVersion, before labels) and
# custom resources with sorted keys (ownerReferences and managedFields hold none).
_VERSION = b'"resourceVersion":"'
_CHANGES = (b'{"type":"ADDED"', b'{"type":"MODIFIED"', b'{"type":"DELETED"')
# Where the object's metadata ends: its spec follows it in either order ("metadata" < "spec" <
# "status" sorted; field order for built-in kinds). Labels and annotations hold strings
# (`"spec":"`), managedFields' keys are prefixed (`"f:spec":{`), so the first `,"spec":{` is the
# object's. Spec and status are most of a run's or a pod's bytes and none of what a glance reads.
_SPEC = b',"spec":{'


def _values(line: bytes, key: bytes, end: int, first: bool = False) -> list[str]:
    """The string values of every `"key":"value"` in the line (bytes.find, not a regular
    expression: a glance at a 6 KB pod's event took 30 us with regular expressions, 15 with finds;
    json.loads 60)."""
    found, start = [], 0
    while (at := line.find(key, start, end)) != -1:
        begin = at + len(key)
        close = line.find(b'"', begin, end)
        if close == -1:
            break
        found.append(line[begin:close].decode(errors="replace"))
        if first:
            break
        start = close
    return found


@dataclass(frozen=True)
class Glance:
    change: bool  # an ADDED, MODIFIED or DELETED event (not a BOOKMARK or an ERROR)
    version: str  # the object's resourceVersion, to resume the watch from ("" if none seen)
    namespaces: frozenset[str]
    uids: frozenset[str]
    flagged: bool  # holds one of the markers the caller always wants decoded


def glance(line: bytes, markers: tuple[bytes, ...] = ()) -> Glance:
    """What the object's metadata says (the whole line where no spec follows it)."""
    end = line.find(_SPEC)
    end = len(line) if end == -1 else end
    return Glance(
        change=line.startswith(_CHANGES),
        version=next(iter(_values(line, _VERSION, end, first=True)), ""),
        namespaces=frozenset(_values(line, _NAMESPACE, end)),
        uids=frozenset(u for key in _UIDS for u in _values(line, key, end)),
        flagged=any(line.find(marker, 0, end) != -1 for marker in markers),
    )


def may_concern(seen: Glance, enabled: Callable[[str], bool], held: Callable[[str], bool]
                ) -> bool:
    """Whether the event must be decoded: anything but a change, a change in an enabled
    namespace, of something held here, or carrying a marker."""
    return (not seen.change or seen.flagged or any(enabled(n) for n in seen.namespaces)
            or any(held(u) for u in seen.uids))


def marker(key: str, value: str | None = None) -> bytes:
    """A label as it appears in the raw JSON: `"key":"` or `"key":"value"`."""
    return f'"{key}":"{value}"'.encode() if value is not None else f'"{key}":"'.encode()
