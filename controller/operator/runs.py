"""The operator's work on runs: observe (kube), decide (reconcile), act and tell (the executor).

The handlers (faces/streams.py, faces/kopf_handlers.py) call these methods and nothing else. Each
is safe to run again with the same input: restarts and replayed events are harmless.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from typing import Any

import structlog

from controller.core.basics import names
from controller.core.capacity import nodes
from controller.core.model import tekton
from controller.core.placement import balloon, reconcile, runplan
from controller.core.placement.reconcile import Verb
from controller.core.placement.runplan import Ask
from controller.kube.caches import Caches
from controller.kube.client import Kube
from controller.kube.clusterview import ClusterView
from controller.kube.nodeindex import NodeIndex
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.anchors import AnchorGuard, Unplaced, WaitingPods
from controller.operator.balloons import Balloons, Budgets
from controller.operator.capacity import Capacity
from controller.operator.estimates import Estimates, Resolving, Sources
from controller.operator.executor import Assistant, Executor, Notifier
from controller.operator.headroom import Headroom, Warming
from controller.operator.marking import Gates, Marks
from controller.operator.memory import LiveRuns, Memories, later
from controller.operator.observe import Observer, Settled
from controller.operator.placement import Placement
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
        self.warming = Warming(self.executor, caches, view, metrics, self.node_index)
        self.placement = Placement(kube, metrics, self.executor, self.index, self.memory,
                                   self.balloon_of, self.warming, self.later)
        self.gates = Gates(self.executor, self.index, metrics, self.memory, self.node_index)
        self.budgets = Budgets(self.executor, caches)
        self.balloons = Balloons(self.executor, metrics, self.budgets, self.placement)
        self.unplaced = Unplaced(settings, kube, self.index, metrics, self.executor)
        self.anchors = AnchorGuard(kube, self.index, self.node_index, self.placement, metrics,
                                   self.executor, self.memory, self.soon)
        self.waiting = WaitingPods(settings, self.index, metrics, self.executor,
                                   self.live.claims_tekton_makes, self.later)
        # What a ResolutionRequest's event wakes (in the caches' watch thread) goes on the work
        # queue: nudge, not reconcile.
        resolving = Resolving(caches, self.live.get, self.nudge, self.memory, self.later)
        self.estimates = Estimates(caches, self.index, resolving, self.memory)
        headroom = Headroom(settings, caches, self.index, self.estimates.known, self.live.runs,
                            self.memory, self.node_index.nodes, kube)
        self.capacity = Capacity(settings, self.executor, caches, self.index, metrics,
                                 self.estimates, headroom, self.memory, self._room_later)
        self.observer = Observer(kube, caches, self.index, self.capacity, self.warming,
                                 self._lasting)
        installation = f"{settings.namespace_label}={settings.namespace_label_value}"
        self.marks = Marks(kube, self.executor, installation, self.live.runs, self.index,
                           self.memory, self.soon)
        self.policies = Policies(settings, kube, self.executor, metrics, view)
        view.subscribe(self.settled.on_facts)
        if caches is not None:
            self.settled.listen_to(caches)
            caches.listen("nodes", self._node_event, reads=nodes.reads)
        view.subscribe(self.marks.on_facts)
        view.subscribe(Assistant(settings, metrics, self.executor, self.soon).on_facts)

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
        """Work of a run on the work queue under its key, at once or in `seconds` (one worker
        at a time acts on a run, a failure is retried there); without a queue (unit tests),
        done in place, and a later one not at all (the tests ask for it themselves)."""
        if self.enqueue is not None:
            self.enqueue(run_uid, slot, act, seconds)
        elif seconds == 0.0:
            act()

    def later(self, run_uid: str, slot: str, act: Callable[[], None], seconds: float) -> None:
        """A wait of the run, as work put for later under its key (operator/memory.later)."""
        later(self.memory, self.soon, run_uid, slot, act, seconds)

    # -- reservation pods (operator/capacity.py) ----------------------------------------------

    def tend_room(self, run_uid: str, plan: Mapping[str, Any] | None = None,
                  src: Sources | None = None) -> None:
        """The live run's reservation pod kept where core/capacity/reservation.py says; a balloon to
        be planned again without one goes back on the work queue (`plan`: as just planned)."""
        body = self.live.get(run_uid)
        if body is None:
            return
        ns = str((body.get("metadata") or {}).get("namespace") or "")
        existing = self.balloon_of(ns, balloon.balloon_name(run_uid))
        if self.capacity.tend(body, self.view.facts, existing, plan, src):
            self.nudge(body)

    def _room_later(self, run_uid: str, seconds: float) -> None:
        self.later(run_uid, "room", lambda: self._room_due(run_uid), seconds)

    def _room_due(self, run_uid: str) -> None:
        """Its reservation's wait ran out: tended (looked at before it has a balloon)."""
        body = self.live.get(run_uid)
        ns = str(((body or {}).get("metadata") or {}).get("namespace") or "")
        if body is not None and self.balloon_of(ns, balloon.balloon_name(run_uid)) is None:
            self.look(body)
        else:
            self.tend_room(run_uid)

    def on_run_pod(self, pod: Mapping[str, Any]) -> None:
        """A pod of a run changed: its reservation may follow, what waits for a node be said."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        run = tekton.task_run_pod_run(labels)
        uid = run.uid if run is not None else str(labels.get(names.LABEL_RUN_UID) or "")
        self.tend_room(uid)
        self.waiting.look(uid)

    def on_room_pod(self, pod: Mapping[str, Any], deleted: bool) -> None:
        uid = self.capacity.on_room_pod(pod, deleted)
        body = self.live.get(uid)
        meta, found_room = pod.get("metadata") or {}, (pod.get("spec") or {}).get("nodeName")
        if (not deleted and found_room and body is not None and self.balloon_of(
                str(meta.get("namespace")), balloon.balloon_name(uid)) is None):
            self.nudge(body)  # the scout found room: now the balloon is made, beside it
        else:
            self.tend_room(uid)

    # -- nodes ----------------------------------------------------------------------------------

    def on_node(self, node: Mapping[str, Any], deleted: bool = False) -> None:
        """Kept once, in the node index; then the anchors on the node are looked at."""
        self.node_index.on_node(node, deleted=deleted)
        self.anchors.on_node(str((node.get("metadata") or {}).get("name") or ""))

    def _node_event(self, node: Mapping[str, Any]) -> None:
        """From the nodes' watch cache (its first list included): gone when it holds it no more."""
        assert self.caches is not None
        self.on_node(node, deleted=not self.caches.holds("nodes", node))

    def balloon_of(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The balloon StatefulSet, from the watch cache once it is synced."""
        if self.caches is not None and self.caches.synced:
            return self.caches.balloon(namespace, name)
        return self.kube.get_statefulset(namespace, name)

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
        admitted = runplan.admit(run, serves, not run.finished or self._may_have_balloon(run),
                                 run.finished and bool(self.index.rooms(run.uid)))
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
                self.capacity.release(run.uid, "run finished")
            return admitted.done
        existing = self.balloon_of(run.namespace, balloon.balloon_name(run.uid))
        if runplan.name_taken(run, existing):
            assert existing is not None
            log.error("statefulset with the balloon's name is not ours; leaving it alone",
                      name=existing["metadata"]["name"], namespace=run.namespace)
            return reconcile.Decision(Verb.NONE, "name taken")
        observed, src = self.observer.observe(run, facts, existing, serves)
        if existing is None:  # a ResolutionRequest's event wakes the runs whose anchor waits
            self.estimates.resolving.hold(run, observed.resolving)
        asked: frozenset[Ask] = frozenset()
        while (planned := runplan.plan(observed, newest, asked)).ask is not None:
            asked |= {planned.ask}
            if planned.ask is Ask.BALLOON_NODE:  # asked of the API server once per run
                node = self.placement.node_of(run.namespace, run.uid)
                observed = replace(observed, balloon_pod_node=node or observed.balloon_pod_node)
            elif (fresh := self.observer.fresh(run)) is not run.raw:
                return self._decide_again(run, fresh)  # the body was old: decided on the new
        decision = planned.decision
        if not planned.anchors:  # opted out: its placeholders go as they are
            self.gates.forget(run.uid)
        self.balloons.act(run, decision, existing)
        marked = True
        if planned.keeps:
            marked = self.marks.ensure(run, facts.topology_key(run.namespace))
            self.tend_room(run.uid, decision.manifest, src)
        elif self.index.rooms(run.uid):
            self.capacity.release(run.uid, decision.why)
        live = self.live.reconciled(run.uid)
        if live and decision.verb is Verb.KEEP and marked:  # a mark not made: its next event
            self.settled.settle(run.uid, run.namespace, begun, reconcile.reads(run))
        else:
            self.settled.forget(run.uid)
        return decision

    def _may_have_balloon(self, run: tekton.PipelineRun) -> bool:
        """A finished run's events cost nothing once its balloon is known gone."""
        if self.caches is None or not self.caches.synced:
            return True
        return self.caches.balloon(run.namespace, balloon.balloon_name(run.uid)) is not None

    def _decide_again(self, run: tekton.PipelineRun, fresh: Mapping[str, Any] | None
                      ) -> reconcile.Decision:
        self.live.drop(run.uid, only=run.raw)
        self.settled.forget(run.uid)
        if fresh is not None and (fresh.get("metadata") or {}).get("uid") == run.uid:
            return self.reconcile_run(fresh, newest=True)  # not asked for a second time
        return reconcile.Decision(Verb.NONE, "run no longer live")
