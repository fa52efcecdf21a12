"""Pure: the reservation pod's manifest, from the run's balloon (core/capacity/reservation.py
decides when a scout or a keeper is made, and how large)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.core.basics import names, quantity
from controller.core.capacity.reservation import (
    ANNOTATION_HALVINGS,
    ANNOTATION_PEAK,
    ANNOTATION_ROLE,
    HOSTNAME,
    SCOUT,
    balloon_term,
    selector_labels,
)


def room_name(balloon_name: str, halvings: int) -> str:
    return f"{balloon_name}-room-{halvings}"


def manifest(
    statefulset: Mapping[str, Any],
    run_uid: str,
    role: str,
    size: Mapping[str, int],
    halvings: int,
    full: Mapping[str, int],
    priority_class: str,
) -> dict[str, Any]:
    """A reservation pod of the run, from its balloon's manifest (planned or made). Owned by
    the PipelineRun, as the balloon is: the scout exists before the balloon does."""
    meta = statefulset["metadata"]
    template = statefulset["spec"]["template"]["spec"]
    container = dict(template["containers"][0])
    amounts = quantity.to_k8s(size)
    container.update(name="reserve", volumeMounts=[], resources=(
        {"requests": amounts, "limits": dict(amounts)} if amounts else {}
    ))
    if role == SCOUT:
        # Where the balloon may go: its selectors, tolerations, affinity and claims (so that
        # a volume binds where the run can use it), but not its term towards this pod.
        spec = {k: v for k, v in template.items() if k not in ("affinity", "containers")}
        affinity = _without_room_term(template.get("affinity") or {}, run_uid)
        if affinity:
            spec["affinity"] = affinity
        container["volumeMounts"] = list(template["containers"][0].get("volumeMounts") or [])
    else:
        spec = {k: v for k, v in template.items() if k in (
            "tolerations", "securityContext", "imagePullSecrets", "automountServiceAccountToken",
            "enableServiceLinks",
        )}
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": dict(statefulset["spec"]["selector"]["matchLabels"])},
             "topologyKey": HOSTNAME},
        ]}}
    spec.update(
        containers=[container],
        priorityClassName=priority_class,
        terminationGracePeriodSeconds=0,
        restartPolicy="Always",
    )
    spec.pop("priority", None)
    labels = {**selector_labels(run_uid), names.LABEL_NAME: names.APP}
    if names.LABEL_RUN in (meta.get("labels") or {}):
        labels[names.LABEL_RUN] = meta["labels"][names.LABEL_RUN]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": room_name(meta["name"], halvings),
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": {
                ANNOTATION_ROLE: role,
                ANNOTATION_HALVINGS: str(halvings),
                ANNOTATION_PEAK: quantity.describe(full),
            },
            "ownerReferences": [dict(o) for o in meta.get("ownerReferences") or []],
        },
        "spec": spec,
    }


def _without_room_term(affinity: Mapping[str, Any], run_uid: str) -> dict[str, Any]:
    out = {k: v for k, v in affinity.items() if k != "podAffinity"}
    pod_affinity = dict(affinity.get("podAffinity") or {})
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    terms = [t for t in pod_affinity.get(key) or [] if t != balloon_term(run_uid)]
    if terms:
        pod_affinity[key] = terms
    else:
        pod_affinity.pop(key, None)
    if pod_affinity:
        out["podAffinity"] = pod_affinity
    return out
