"""The operator's work on runs: a look at a run observes it (operator/observe.py, capacity.py),
plans (core/placement/runplan.py, pure) and applies the plan (operator/apply.py, the executor).
The handlers (faces/streams.py, faces/kopf_handlers.py) call these methods and nothing else. Each
is safe to run again with the same input: restarts and replayed events are harmless.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog

from controller.core.basics import names
from controller.core.capacity import nodes, roomplan
from controller.core.model import resolution, tekton
from controller.core.placement import balloon, reconcile, runplan
from controller.core.placement.reconcile import Verb
from controller.core.placement.runplan import Ask
from controller.kube.caches import Caches, balloon_of, may_have_balloon
from controller.kube.client import Kube
from controller.kube.clusterview import ClusterView
from controller.kube.nodeindex import NodeIndex
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.anchors import AnchorGuard, Unplaced, WaitingPods
from controller.operator.apply import Applier
from controller.operator.capacity import Capacity
from controller.operator.estimates import Estimates, Resolving
from controller.operator.executor import Assistant, Executor, Notifier
from controller.operator.headroom import Headroom, Warming
from controller.operator.marking import Gates, Marks
from controller.operator.memory import LiveRuns, Memories, later
from controller.operator.observe import Observer, Settled
from controller.operator.placement import Budgets, Placement
from controller.operator.policies import Policies
from controller.settings import Settings

log = structlog.get_logger(__name__)


class Operator:
    def __init__(
        self,
        settings: Settings,
        kube: Kube,
        view: ClusterView,
        metrics: Metrics,
        caches: Caches | None = None,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.view = view
        self.metrics = metrics
        self.caches = caches
        # The balloon StatefulSet, from the watch cache once it is synced.
        self.balloon_of = functools.partial(balloon_of, caches, kube)
        # Puts a run on the leader's work queue (faces/streams.py sets it): see nudge.
        self.submit: Callable[[str, Mapping[str, Any], bool], None] | None = None
        # Puts any work of a run on that queue, under the run's key (faces/streams.py): see soon.
        self.enqueue: Callable[[str, Hashable, Callable[[], None], float], None] | None = None
        self.notifier = Notifier(kube)
        # Every write and Event of the operator goes through it (operator/executor.py).
        self.executor = Executor(kube, self.notifier)
        self.index = PodIndex()
        # What the leader remembers of each run between two looks at it (operator/memory.py).
        self.memory = Memories()
        # The live runs: those whose memory holds their body.
        self.live = LiveRuns(self.memory, lambda r: self.observer.claim_naming(r, view.facts)[0])
        # Live runs whose last decision kept their balloon, until something they read changes.
        self.settled = Settled(settings.resync_settled_rounds, self.index, self.memory)
        # What the node watch last showed of each node (kube/nodeindex.py).
        self.node_index = NodeIndex(metrics)
        self.warming = Warming(caches, view, self.node_index)
        self.budgets = Budgets(self.executor, caches, self.memory)
        # A run's plan, or its reservation's part, applied through the executor.
        self.applier = Applier(self.executor, metrics, self.index, self.memory, self._look_later)
        self.placement = Placement(kube, metrics, self.applier, self.index, self.memory,
                                   self.balloon_of, self.warming, self.later)
        self.gates = Gates(self.applier, self.index, self.memory, self.node_index)
        self.unplaced = Unplaced(settings, kube, self.index, self.applier)
        self.anchors = AnchorGuard(kube, self.index, self.node_index, metrics, self.applier,
                                   self.memory, self.soon)
        self.waiting = WaitingPods(settings, self.index, metrics, self.applier,
                                   self.live.claims_tekton_makes, self.later)
        # What a ResolutionRequest's event wakes (in the caches' watch thread) goes on the work
        # queue: nudge, not reconcile.
        resolving = Resolving(caches, self.live.get, self.nudge, self.memory)
        self.estimates = Estimates(caches, self.index, resolving, self.memory)
        headroom = Headroom(settings, caches, self.index, self.estimates.known, self.live.runs,
                            self.memory, self.node_index.nodes, kube)
        self.capacity = Capacity(settings, caches, self.index, self.estimates, headroom,
                                 self.memory)
        self.observer = Observer(kube, caches, self.index, self.capacity, self.warming,
                                 self._lasting)
        installation = f"{settings.namespace_label}={settings.namespace_label_value}"
        self.marks = Marks(kube, self.applier, installation, self.live.runs, self.index,
                           self.memory, self.soon)
        self.policies = Policies(settings, kube, self.executor, metrics, view)
        view.subscribe(self.settled.on_facts)
        if caches is not None:
            self.settled.listen_to(caches)
            caches.listen("nodes", self._node_event, reads=nodes.reads)
        view.subscribe(self.marks.on_facts)
        view.subscribe(Assistant(settings, metrics).on_facts)

    # -- PipelineRuns ----------------------------------------------------------------------

    def look(self, body: Mapping[str, Any], listed: bool = False) -> None:
        """A look at a run that is no watch event (the resync's, a nudge): a body an event has
        replaced since, or whose run ended, is left alone (it would make an ended run live);
        `listed`: from the resync's first list of every run, decided whatever is live."""
        if listed or self.still_current(body):
            self.reconcile_run(body)

    def nudge(self, body: Mapping[str, Any]) -> None:
        """The run looked at again soon, on the work queue (a failure is retried there, never
        breaking the watch whose event asked); in place without a queue (unit tests)."""
        uid = str((body.get("metadata") or {}).get("uid") or "")
        if self.submit is not None:
            self.submit(uid, body, False)
        else:
            self.look(body)

    def soon(self, run_uid: str, slot: Hashable, act: Callable[[], None],
             seconds: float = 0.0) -> None:
        """Work of a run on the work queue under its key, at once or in `seconds` (one worker at
        a time acts on a run); without a queue (unit tests), done in place, a later one not."""
        if self.enqueue is not None:
            self.enqueue(run_uid, slot, act, seconds)
        elif seconds == 0.0:
            act()

    def later(self, run_uid: str, slot: str, act: Callable[[], None], seconds: float) -> None:
        """A wait of the run, as work put for later under its key (operator/memory.later)."""
        later(self.memory, self.soon, run_uid, slot, act, seconds)

    def tend_room(self, run_uid: str) -> None:
        """The live run's reservation step alone (its pods' events): planned from its part of
        the snapshot (core/capacity/roomplan.py) and applied."""
        body = self.live.get(run_uid)
        if body is None:
            return
        run = tekton.PipelineRun.from_body(body)
        existing = self.balloon_of(run.namespace, balloon.balloon_name(run_uid))
        if (room := self.capacity.view(run, self.view.facts, existing)) is None:
            return
        planned = roomplan.plan(room)
        if self.applier.apply(run, planned.actions, planned).replan:
            self.nudge(body)  # its balloon is not to wait for a reservation: planned again

    def _look_later(self, run_uid: str, seconds: float) -> None:
        """A plan's requeue_after: the run looked at again then (once, the soonest kept)."""
        self.later(run_uid, "look", lambda: self._due(run_uid), seconds)

    def _due(self, run_uid: str) -> None:
        """Its wait ran out: looked at anew before it has a balloon, else its reservation tended."""
        if (body := self._without_balloon(run_uid)) is not None:
            self.look(body)
        else:
            self.tend_room(run_uid)

    def _without_balloon(self, run_uid: str) -> Mapping[str, Any] | None:
        """The live run's body, if it has no balloon yet."""
        body = self.live.get(run_uid)
        ns = str(((body or {}).get("metadata") or {}).get("namespace") or "")
        return body if body and not self.balloon_of(ns, balloon.balloon_name(run_uid)) else None

    def on_run_pod(self, pod: Mapping[str, Any]) -> None:
        """A pod of a run changed: its reservation may follow, what waits for a node be said."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        run = tekton.task_run_pod_run(labels)
        uid = run.uid if run is not None else str(labels.get(names.LABEL_RUN_UID) or "")
        self.tend_room(uid)
        self.waiting.look(uid)

    def on_room_pod(self, pod: Mapping[str, Any], deleted: bool) -> None:
        uid = self.capacity.on_room_pod(pod, deleted)
        found_room = not deleted and (pod.get("spec") or {}).get("nodeName")
        if found_room and (body := self._without_balloon(uid)) is not None:
            self.nudge(body)  # the scout found room: now the balloon is made, beside it
        else:
            self.tend_room(uid)

    def on_node(self, node: Mapping[str, Any], deleted: bool = False) -> None:
        """Kept once, in the node index; then the anchors on the node are looked at."""
        self.node_index.on_node(node, deleted=deleted)
        self.anchors.on_node(str((node.get("metadata") or {}).get("name") or ""))

    def _node_event(self, node: Mapping[str, Any]) -> None:
        """From the nodes' watch cache (its first list included): gone when it holds it no more."""
        assert self.caches is not None
        self.on_node(node, deleted=not self.caches.holds("nodes", node))

    def _lasting(self, run_uid: str) -> bool:
        """The run is live, or the live runs are not all known yet (the first resync round)."""
        return not self.marks.seeded or run_uid in self.live

    def forget_run(self, body: Mapping[str, Any]) -> None:
        """The run is deleted (its balloon goes by garbage collection)."""
        uid = str((body.get("metadata") or {}).get("uid") or "")
        self.live.drop(uid)
        self.settled.forget(uid)
        self.capacity.forget(uid)
        self.marks.forget(uid)
        self.gates.forget(uid)

    def still_current(self, body: Mapping[str, Any]) -> bool:
        """This body is still the one held for a live run (no newer event, the run not ended)."""
        return self.live.holds(str((body.get("metadata") or {}).get("uid") or ""), body)

    def run_event(self, body: Mapping[str, Any]) -> None:
        """A watch event of a run: reconciled, unless the run is settled and the event changed
        nothing its decision reads (operator/observe.py); then only its body is kept."""
        run = tekton.PipelineRun.from_body(body)
        if self.settled.quiet(run.uid, reconcile.reads(run)) and self.live.refresh(run.uid, body):
            return
        self.reconcile_run(body, run, newest=True)

    def reconcile_run(self, body: Mapping[str, Any], run: tekton.PipelineRun | None = None,
                      newest: bool = False) -> reconcile.Decision:
        """Admit, observe, plan, act for one run (core/placement/runplan.py). `run`: the body
        already read, if it was; `newest`: no newer body is known (a watch event's, decided
        before any newer one of the run, or the API server's just asked for)."""
        begun = self.settled.begin()  # before anything is read: see Settled.settle
        run = run if run is not None and run.raw is body else tekton.PipelineRun.from_body(body)
        facts = self.view.facts
        if not run.valid:
            log.warning("pipelinerun without name, namespace or uid; ignored")
            return reconcile.Decision(Verb.NONE, "invalid run")
        # A run anchored before its namespace was switched off stays ours to its end.
        serves = self.marks.serves(run, facts) or bool(self.index.run_pods(run.uid))
        ended, sts = run.finished, balloon.balloon_name(run.uid)
        kept = not ended or may_have_balloon(self.caches, run.namespace, sts)
        admitted = runplan.admit(run, serves, kept, ended and bool(self.index.rooms(run.uid)))
        if admitted.live:
            self.live.keep(run.uid, body)
        else:
            self.live.drop(run.uid)
        if admitted.forget_settled:
            self.settled.forget(run.uid)
        if admitted.forget_ended:  # finished runs stay in the cluster: their memory need not
            self.capacity.forget(run.uid)
            self.marks.forget(run.uid)
        if not admitted.live:  # no balloon comes: nothing of the run waits for one
            self.gates.forget(run.uid)
        if admitted.done is not None:
            if admitted.release_room:  # it ended while its scout looked for room
                self.applier.release(roomplan.release(self.capacity.rooms(run.uid),
                                                      "run finished"))
            return admitted.done
        existing = self.balloon_of(run.namespace, sts)
        if runplan.name_taken(run, existing):
            assert existing is not None
            log.error("statefulset with the balloon's name is not ours; leaving it alone",
                      name=existing["metadata"]["name"], namespace=run.namespace)
            return reconcile.Decision(Verb.NONE, "name taken")
        observed, src = self.observer.observe(run, facts, existing, serves)
        view = runplan.View(observed, newest, self.marks.marking(run, facts), existing,
                            self.memory.budget_kept(run.namespace), self.capacity.rooms(run.uid),
                            **self.gates.held(run.uid),
                            resolving=self.memory.get(run.uid).resolving,
                            hold_left=resolution.hold_left(run.created, datetime.now(UTC)))
        while (planned := runplan.plan(view)).ask is not None:
            view = replace(view, asked=view.asked | {planned.ask})
            if planned.ask is Ask.BALLOON_NODE:  # asked of the API server once per run
                node = self.placement.node_of(run.namespace, run.uid)
                view = replace(view, observed=replace(
                    observed, balloon_pod_node=node or observed.balloon_pod_node))
            elif planned.ask is Ask.ROOM:  # for the balloon as made, or as planned now
                view = replace(view, decided=planned.decision, room=self.capacity.view(
                    run, facts, existing, planned.decision.manifest, src)
                    if run.uid in self.live else None)
            elif (fresh := self.observer.fresh(run)) is not run.raw:
                return self._decide_again(run, fresh)  # the body was old: decided on the new
        decision = planned.decision
        applied = self.applier.apply(run, planned.actions, planned.room)
        if planned.requeue_after is not None:  # time alone may change its plan then
            self._look_later(run.uid, planned.requeue_after)
        if applied.replan:  # its balloon is not to wait for a reservation: planned again
            self.nudge(body)
        live = self.live.reconciled(run.uid)
        if live and decision.verb is Verb.KEEP and applied.marked:  # else: its next event
            self.settled.settle(run.uid, run.namespace, begun, reconcile.reads(run))
        else:
            self.settled.forget(run.uid)
        return decision

    def _decide_again(self, run: tekton.PipelineRun, fresh: Mapping[str, Any] | None
                      ) -> reconcile.Decision:
        self.live.drop(run.uid, only=run.raw)
        self.settled.forget(run.uid)
        if fresh is not None and (fresh.get("metadata") or {}).get("uid") == run.uid:
            return self.reconcile_run(fresh, newest=True)  # not asked for a second time
        return reconcile.Decision(Verb.NONE, "run no longer live")
