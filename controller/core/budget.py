"""Pure: the PodDisruptionBudget that keeps a drain or an autoscaler from evicting a balloon."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def of_balloon(statefulset: Mapping[str, Any]) -> dict[str, Any]:
    """A PodDisruptionBudget that refuses every eviction of the balloon pod. A drain, or an
    autoscaler taking the node away, would otherwise evict the anchor from under a running task
    and re-create it elsewhere, away from the task's volume. The operator moves the anchor
    itself, by deleting the pod (which no budget blocks), when it may (core/anchor.py), so a
    drain waits no longer than the run's pods on that node. Owned by the StatefulSet: it goes
    when the balloon goes."""
    meta = statefulset["metadata"]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": dict(meta.get("labels") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": dict(statefulset["spec"]["selector"]["matchLabels"])},
        },
    }
