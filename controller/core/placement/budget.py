"""Pure: the PodDisruptionBudget that keeps a drain or an autoscaler from evicting a balloon.

One budget a namespace covers every balloon of the namespace (`maxUnavailable: 0`: no eviction
of any of them is ever allowed). A drain, or an autoscaler taking the node away, would otherwise
evict the anchor from under a running task and re-create it elsewhere, away from the task's
volume. The operator moves an anchor itself, by deleting the pod (which no budget blocks), when
it may (core/placement/anchor.py), so a drain waits no longer than the run's pods on that node.

Why not a budget a balloon, as before: kube-controller-manager's disruption controller matches
every pod event of a namespace against every budget of the namespace, converting each one's
selector anew; at 1,000 runs in one namespace that was 60% of the controller-manager's CPU
(pprof, bench-scale), a cost growing with the square of the runs, paid by the whole cluster.
With one budget a namespace each pod event meets one selector.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from controller.core.basics import names

NAME: Final = "tekton-coscheduler-balloons"


def of_namespace(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": NAME,
            "namespace": namespace,
            "labels": {
                names.LABEL_NAME: names.APP,
                names.LABEL_COMPONENT: names.COMPONENT_BUDGET,
                names.LABEL_MANAGED_BY: names.APP,
            },
        },
        "spec": {
            "maxUnavailable": 0,
            "selector": {"matchLabels": {
                names.LABEL_MANAGED_BY: names.APP,
                names.LABEL_COMPONENT: names.COMPONENT_BALLOON,
                names.LABEL_BUDGET: names.BUDGET_NAMESPACE,
            }},
        },
    }


@dataclass(frozen=True)
class Plan:
    create: tuple[str, ...]  # namespaces whose balloons no budget covers
    delete: tuple[str, ...]  # budgets of namespaces switched off with no balloon left


def plan(with_balloons: Iterable[str], budgeted: Iterable[str],
         enabled: frozenset[str]) -> Plan:
    """A namespace keeps its budget while it is enabled (a run at a time would otherwise make
    and delete it for each run), and while a balloon is left in it: what we make in a team's
    namespace is one small object, gone once the namespace is switched off and its runs end."""
    balloons, have = set(with_balloons), set(budgeted)
    return Plan(
        create=tuple(sorted(balloons - have)),
        delete=tuple(sorted(ns for ns in have - balloons if ns not in enabled)),
    )
