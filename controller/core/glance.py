"""A glance at a watch event's raw line, before it is decoded: whose it may be.

Most PipelineRun and TaskRun-pod events of a cluster are of namespaces that did not opt in, and
decoding their JSON was most of what they cost the leader (docs/figures.md). A glance reads the
few fields that tell whether an event may concern us with three regular expressions over the
bytes, and the rest is dropped undecoded.

A glance may say "maybe" of an event that is not ours (it is decoded, and the exact test drops
it); it must never say "no" of one that is. So it collects every `"namespace":"…"` and every uid
the line holds, not only the object's own: a run's ownerReferences, or a label that happens to
be called `namespace`, only add candidates. A quote inside a JSON string is escaped (`\\"`), so
annotation values (JSON in a string, as kubectl's last-applied) cannot pose as fields.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_NAMESPACE = re.compile(rb'"namespace":"([^"\\]*)"')
_UID = re.compile(rb'"(?:uid|tekton\.dev/pipelineRunUID)":"([^"\\]*)"')
# The object's own resourceVersion is its metadata's, which precedes spec and status; the API
# server writes built-in kinds in field order (uid, then resourceVersion, before labels) and
# custom resources with sorted keys (ownerReferences and managedFields hold none).
_VERSION = re.compile(rb'"resourceVersion":"([0-9]+)"')
_CHANGES = (b'{"type":"ADDED"', b'{"type":"MODIFIED"', b'{"type":"DELETED"')


@dataclass(frozen=True)
class Glance:
    change: bool  # an ADDED, MODIFIED or DELETED event (not a BOOKMARK or an ERROR)
    version: str  # the object's resourceVersion, to resume the watch from ("" if none seen)
    namespaces: frozenset[str]
    uids: frozenset[str]
    flagged: bool  # holds one of the markers the caller always wants decoded


def glance(line: bytes, markers: tuple[bytes, ...] = ()) -> Glance:
    version = _VERSION.search(line)
    return Glance(
        change=line.startswith(_CHANGES),
        version=version.group(1).decode() if version else "",
        namespaces=frozenset(m.decode(errors="replace") for m in _NAMESPACE.findall(line)),
        uids=frozenset(m.decode(errors="replace") for m in _UID.findall(line)),
        flagged=any(marker in line for marker in markers),
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
