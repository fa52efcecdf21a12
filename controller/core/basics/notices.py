"""Pure: something to tell a run's owner, as a Kubernetes Event on the PipelineRun."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Notice:
    reason: str
    message: str
    # A Warning asks a person to act; what resolves itself is said as Normal, or not at all.
    warning: bool = True
