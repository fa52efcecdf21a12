"""What /metrics tells an administrator, read from a process's registry in tests."""

from __future__ import annotations

from controller.metrics import PREFIX, Metrics


def said(metrics: Metrics, name: str, **labels: str) -> float | None:
    """The sample `tekton_coscheduler_<name>` with these labels (None: never set)."""
    return metrics.registry.get_sample_value(f"{PREFIX}_{name}", labels)
