"""Pure: what should exist for a PipelineRun, given what is observed now.

Level-based: the same observation always gives the same decision, so replayed events, resyncs
and restarts are harmless.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.core.basics.notices import Notice
from controller.core.capacity import reservation
from controller.core.model import claimlimit, tekton
from controller.core.model.assistant import Mode
from controller.core.placement import balloon, warm
from controller.core.policy.policy import EffectivePolicy, Isolation


class Verb(enum.StrEnum):
    CREATE = "create"
    # Replace the template and the pod: only while the pod is not bound, so it never moves.
    UPDATE = "update"
    DELETE = "delete"
    KEEP = "keep"
    NONE = "none"


@dataclass(frozen=True)
class Observed:
    run: tekton.PipelineRun
    namespace_enabled: bool
    policy: EffectivePolicy
    tekton_default_template: Mapping[str, Any] | None
    pvcs: Sequence[Mapping[str, Any]]
    balloon: Mapping[str, Any] | None
    balloon_pod_node: str | None = None
    # Claims mounted by the other live balloons of the namespace (run uid -> claim names).
    others: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # The run's peak asks for more than pod slots and capacity-aware anchoring is on: the
    # balloon follows a reservation pod (core/capacity/reservation.py).
    room: bool = False
    # The node of the run's reservation pod, once bound: the balloon is made only then, so
    # that the two never bind (and race for the run's claims) at the same time.
    room_node: str | None = None
    # What Tekton is still resolving of a run whose pipeline or tasks are behind a resolver,
    # while capacity-aware anchoring waits for the run's peak (core/model/resolution.py).
    resolving: str | None = None
    # Where the run starts fastest (its images, its pipeline's warm cache), when its anchor is
    # still to be chosen: preferred, never required.
    warmth: warm.Warmth | None = None
    # What the observation found worth saying on the run (a peak that cannot be estimated, a
    # quota that limits its reservation): said before the decision's own notices.
    notices: tuple[Notice, ...] = ()
    # Tekton's assistant is on per run: its placeholder's StatefulSet makes the templated claims.
    claims_per_run: bool = False
    # Tekton's assistant's mode now (None: off or unknown): what Tekton refuses of the run's
    # tasks in it is said (core/model/claimlimit.py).
    assistant_mode: Mode | None = None


@dataclass(frozen=True)
class Decision:
    verb: Verb
    why: str
    manifest: Mapping[str, Any] | None = None
    notices: tuple[Notice, ...] = field(default=())


def desired_claims(
    run: tekton.PipelineRun, pvcs: Sequence[Mapping[str, Any]], per_run: bool = False
) -> list[tekton.Claim]:
    """Named and templated claims from the spec, and every claim the run owns.

    Owned claims are found whatever their name: Tekton's naming is Tekton's, not ours.
    """
    named = tekton.with_access_modes(run.claims(per_run), pvcs)
    known = {c.name for c in named}
    owned = [c for c in tekton.claims_owned_by(pvcs, run.uid) if c.name not in known]
    return named + owned


def reads(run: tekton.PipelineRun) -> object:
    """What a run's decision, and what follows it (its mark, its peak, its resolution), read of
    the PipelineRun itself: an event that changes none of it changes no decision. Tekton rewrites
    a running run's status a few dozen times (each TaskRun made, each condition's message)."""
    return (run.labels, run.annotations, run.spec, run.succeeded_status,
            bool(run.status.get("childReferences")), run.status.get("pipelineSpec"))


def anchors(obs: Observed) -> bool:
    """Whether the run has, or is to have, a balloon (its placeholders wait for it, and are
    otherwise let go as they are): what `decide` makes of it, before any wait of its own."""
    run = obs.run
    if not run.valid or run.finished or run.pending:
        return False
    return obs.balloon is not None or (obs.namespace_enabled and not run.opted_out)


def decide(obs: Observed) -> Decision:
    run = obs.run
    exists = obs.balloon is not None
    if not run.valid:
        return Decision(Verb.NONE, "run lacks name, namespace or uid")
    if run.finished:
        return Decision(Verb.DELETE if exists else Verb.NONE, "run finished")
    if run.opted_out and exists:
        # Decided once: opting out after the balloon was made must not leave the run's pods
        # that were already pinned to it waiting for an anchor that was taken away.
        return Decision(Verb.KEEP, "opted out after its balloon was made; it ends with its run")
    if run.opted_out:
        return Decision(Verb.NONE, "run opted out")
    if run.pending:
        return Decision(Verb.DELETE if exists else Verb.NONE, "run pending")
    if exists and not obs.namespace_enabled:
        # Label removed mid-run: the balloon ends with its run.
        return Decision(Verb.KEEP, "namespace no longer enabled; balloon ends with its run")
    if not obs.namespace_enabled:
        return Decision(Verb.NONE, "namespace not enabled")
    if obs.resolving and not exists:
        # Tekton makes no TaskRun before it has resolved every task: no pod waits for this.
        return Decision(Verb.NONE, f"Tekton is resolving {obs.resolving}; the run's peak will "
                        "choose its anchor")
    planned = balloon.plan(
        run,
        obs.policy,
        desired_claims(run, obs.pvcs, obs.claims_per_run),
        obs.tekton_default_template,
        obs.others,
        room=obs.room,
        warmth=obs.warmth,
    )
    notices = []
    if refusal := claimlimit.notice(claimlimit.refused(run, obs.assistant_mode)):
        notices.append(refusal)  # said once per run (operator/executor.py: Say)
    if planned.conflicts:
        notices.append(
            Notice(
                "ConflictingTaskConstraints",
                "no single node can meet the node selectors of all tasks: "
                + "; ".join(planned.conflicts),
            )
        )
    if planned.skipped_claims:
        notices.append(
            Notice(
                "ClaimNotMounted",
                "ReadWriteOncePod claims are anchored by affinity only: "
                + ", ".join(planned.skipped_claims),
                warning=False,
            )
        )
    if planned.dropped_tolerations:
        keys = ", ".join(
            f"{t.get('key') or '*'}:{t.get('effect') or '*'}" for t in planned.dropped_tolerations
        )
        notices.append(
            Notice(
                "PolicyTolerationNotCarried",
                f"the namespace's policy tolerates {keys} for the balloon, but the run's pods do "
                "not: the balloon does not use it, or it could anchor the run where its pods "
                "cannot follow (give the pods the toleration in their pod template)",
                warning=False,
            )
        )
    if planned.sharing:
        isolated = obs.policy.isolation is Isolation.REQUIRED
        notices.append(
            Notice(
                "SharedClaimIsolationConflict" if isolated else "SharesClaimWithRuns",
                f"anchored beside run(s) {', '.join(planned.sharing)}: they mount a "
                "ReadWriteOnce claim of this run, which one node at a time can attach"
                + (
                    "; the namespace's policy asks runs to be isolated (required), which "
                    "gives way to the shared claim for these runs"
                    if isolated
                    else ""
                ),
                warning=isolated,
            )
        )
    if planned.cautions:
        notices.append(
            Notice("CoLocationMayFail", "; ".join(planned.cautions), warning=False)
        )
    if obs.balloon is None and obs.room and not obs.room_node:
        return Decision(Verb.NONE, "the reservation looks for room first", planned.manifest)
    if obs.balloon is None:
        return Decision(Verb.CREATE, "live run without balloon", planned.manifest, tuple(notices))
    missing = set(planned.claims) - balloon.claim_names(obs.balloon)
    template = ((obs.balloon.get("spec") or {}).get("template") or {}).get("spec") or {}
    if obs.balloon_pod_node is None and reservation.requires_room(template, run.uid) != obs.room:
        # Capacity-aware anchoring turned on or off, or its reservation cannot be made: the
        # balloon is re-planned while it is not bound, so that it never waits for nothing.
        return Decision(
            Verb.UPDATE,
            "balloon " + ("follows" if obs.room else "no longer waits for") + " a reservation",
            planned.manifest,
            tuple(notices),
        )
    if missing and obs.balloon_pod_node is None:
        return Decision(
            Verb.UPDATE,
            "balloon lacks claims " + ", ".join(sorted(missing)),
            planned.manifest,
            tuple(notices),
        )
    if missing:
        notices.append(
            Notice(
                "ClaimNotAnchored",
                f"claims {', '.join(sorted(missing))} appeared after the balloon was placed on "
                f"{obs.balloon_pod_node}; they are not mounted by the balloon",
            )
        )
    return Decision(Verb.KEEP, "balloon in place", notices=tuple(notices))
