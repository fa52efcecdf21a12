"""The operator when its hold on the API server fails (issue 36): a leader paused past its Lease,
a Lease it may no longer renew, API Priority and Fairness rejecting its calls, a node lost as the
leader dies, a deletion in the gap where the watches must list again, the API server restarted.

What may not happen is read from what the cluster kept (pods, balloons, Events) and from the
replicas' own log lines (e2e/harness/leaders.py): each write is logged with the Lease holder it
acts as. Runs are hand-made (Tekton's objects without its controller): what the operator reads
of them is the same, and a few hundred cost seconds. E2E_OPERATOR_SOURCE runs them against
another commit's operator (harness/release.py): how each was seen failing before.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client

from controller.kube import reflector
from e2e.harness import apifaults, faults, flowcontrol, leaders
from e2e.harness.apifaults import Space
from e2e.harness.cluster import ClusterHandle, LocalCluster, name_of, node_schedulable, present
from e2e.harness.cluster.versions import alive
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.fleet import Fleet
from e2e.harness.tekton_runs import PodRecorder

pytestmark = [pytest.mark.e2e, pytest.mark.apifaults]

CROWD = 200  # live runs while the leader is paused mid-round
THROTTLED = 100  # runs made while API Priority and Fairness rejects the operator's calls
HELD = 8  # runs anchored on the node that is lost
FORBIDDEN = 12.0  # seconds the Lease may not be renewed
# A write is logged just after the fence let it through, and a thread may be switched out in
# between: what the fence must stop lies beyond this.
SLACK = 0.1


@pytest.fixture(scope="module")
def operator(cluster: ClusterHandle, coscheduler: Coscheduler) -> Iterator[Coscheduler]:
    """The session's replica, on a control plane whose processes the scenarios may stop."""
    if not isinstance(cluster, LocalCluster):
        pytest.skip("pauses, restarts and throttles the control plane's own processes")
    yield coscheduler


@pytest.fixture(scope="module")
def room(cluster: ClusterHandle, operator: Coscheduler) -> Iterator[dict[str, str]]:
    """kwok nodes with room for a few hundred balloons, which the runs here are held to."""
    label = {faults.POOL: f"apifaults-{uuid.uuid4().hex[:5]}"}
    made = cluster.add_nodes(3, prefix="apifaults", cpu="64", memory="256Gi", pods=300,
                             labels=label)
    yield label
    with cluster.api_client() as api:
        for node in made:
            client.CoreV1Api(api).delete_node(node)


@pytest.fixture
def space(cluster: ClusterHandle, room: dict[str, str]) -> Iterator[Space]:
    made = Space(cluster, room)
    yield made
    made.delete()


def test_a_leader_paused_mid_round_writes_nothing_once_another_leads(
    cluster: LocalCluster, operator: Coscheduler, space: Space
) -> None:
    """SIGSTOP to the leader's whole replica while its first round gives a few hundred runs
    their balloons; SIGCONT once its Lease has run out and the standby leads. It wakes to a
    token already expired: not one write leaves it, and no live run loses its balloon."""
    s = space
    fleet = Fleet(cluster, operator, standbys=1, name="apifaults-standby")
    standby = fleet.replicas[1]
    with PodRecorder(cluster, s.ns) as recorder:
        try:
            operator.kill()  # no leader while the runs are made: the next one's round finds them
            for i in range(CROWD):
                s.start(f"crowd-{i}")
            restarted = time.time()
            operator.start()
            mine = cluster.wait_for(lambda: leaders.first_leading(
                apifaults.lines_of(operator), restarted), timeout=60, interval=0.05,
                what="the replica leads")
            starting = threading.Thread(target=standby.start, daemon=True)  # the round goes on
            starting.start()
            assert operator.process is not None
            [reconciler] = operator.process.children()
            assert s.first_balloon(), "no balloon made within a minute of leading"
            pids = apifaults.pause(operator)
            paused, made = time.time(), len(s.balloons())
            try:
                assert made < CROWD / 2, f"the round had made {made} balloons before the pause"
                starting.join(60)
                theirs = cluster.wait_for(lambda: leaders.first_leading(
                    apifaults.lines_of(standby), paused), timeout=60, what="the standby leads")
            finally:
                apifaults.resume(pids)
            with contextlib.suppress(TimeoutError):  # what it did meanwhile is read below
                cluster.wait_for(lambda: not alive(reconciler), timeout=30)
            cluster.wait_for(lambda: len(s.anchored()) == CROWD, timeout=180,
                             what=f"all {CROWD} runs anchored by the standby")
        finally:
            fleet.stop_standbys()
            cluster.wait_for(operator.leads, timeout=60, what="the session's replica leads")
    late = leaders.writes(apifaults.lines_of(operator), theirs.at, who=mine.who)
    print(f"\n{mine.who} paused with {made} of {CROWD} balloons made; {theirs.who} led "
          f"{theirs.at - paused:.1f} s after; writes of {mine.who} since: {len(late)}")
    assert not late, (f"{len(late)} writes under {mine.who} after {theirs.who} led: "
                      f"{leaders.counted(late)}")
    deleted = sorted(p.name for p in recorder.all() if p.is_balloon and p.deleted)
    assert not deleted, f"balloons of live runs deleted: {deleted}"


def test_a_leader_that_may_not_renew_writes_nothing_past_its_renew_deadline(
    cluster: LocalCluster, operator: Coscheduler, space: Space
) -> None:
    """`update` on leases taken from the operator's Role for 12 s while runs keep coming: the
    leader cannot renew, and stops writing at its renew deadline (two thirds of the Lease after
    its last renewal), before another replica could take the Lease; given back, a fresh
    reconciler leads and every run is anchored."""
    s = space
    lease = float(operator.env()["COSCHEDULER_LEASE_DURATION"])
    with apifaults.LeaseWatch(cluster, operator) as leases, apifaults.Stream(s, "flow") as flow:
        cluster.wait_for(lambda: len(flow.uids) >= 4, timeout=30, what="runs coming")
        holder = cluster.wait_for(lambda: leases.holder, timeout=10, what="the Lease read")
        with apifaults.lease_updates_forbidden(cluster):
            forbidden = time.time()
            cluster.wait_for(lambda: [t for t, _ in apifaults.log_events(
                operator, ["leadership lost"]) if t > forbidden], timeout=FORBIDDEN,
                what="the leader stops")
            time.sleep(max(0.0, forbidden + FORBIDDEN - time.time()))  # the fault's length
        given_back = time.time()
        back = cluster.wait_for(lambda: leaders.first_leading(
            apifaults.lines_of(operator), given_back), timeout=60, what="a fresh reconciler leads")
    deadline = leases.renewed[holder] + lease * 2 / 3
    late = leaders.writes(apifaults.lines_of(operator), deadline + SLACK, back.at)
    print(f"\n{holder}: renew deadline {apifaults.timestamp(deadline)}; {back.who} led "
          f"{back.at - given_back:.1f} s after the Role was mended; {len(flow.uids)} runs made")
    assert not late, (f"{len(late)} writes past the renew deadline: {leaders.counted(late)}, "
                      f"the first {late[0].at - deadline:.2f} s past it, as {late[0].who}")
    cluster.wait_for(lambda: set(flow.uids) <= s.anchored(), timeout=90,
                     what="every run anchored once the Lease is held again")


def test_runs_throttled_by_api_priority_and_fairness_are_all_anchored(
    cluster: LocalCluster, operator: Coscheduler, space: Space
) -> None:
    """The operator's ServiceAccount in a priority level of one share with a queue of one: what
    does not fit is rejected with 429. A burst of a hundred runs, each with a pod gated until its
    balloon is bound: every run anchored, every pod released, no Warning for what mends itself."""
    s = space
    created: dict[str, float] = {}

    def make(i: int) -> None:
        run = s.start(f"throttled-{i}")
        created[run["metadata"]["uid"]] = time.time()
        s.task_pod(run, "build", claims=())

    with flowcontrol.flow_limited(cluster) as level, PodRecorder(cluster, s.ns) as recorder:
        seats, before = flowcontrol.seats(cluster, level), flowcontrol.rejected(cluster, level)
        with ThreadPoolExecutor(8) as pool:  # as a merge starts pipelines: all at once
            list(pool.map(make, range(THROTTLED)))
        cluster.wait_for(lambda: all(recorder.first_balloon_node(uid) for uid in created),
                         timeout=300, what=f"all {THROTTLED} runs anchored")
        cluster.wait_for(lambda: all(p.node for uid in created for p in recorder.pods(uid)),
                         timeout=120, what="every task pod released and bound")
        throttled = flowcontrol.rejected(cluster, level) - before
    anchored = [min(b.bound_at for b in recorder.balloons(uid) if b.bound_at) - at
                for uid, at in created.items()]
    gated = [p.bound_at - p.first_seen for uid in created for p in recorder.pods(uid)
             if p.gates and p.bound_at]
    retries = {x.labels["reason"]: x.value for x in operator.samples()
               if x.name == "tekton_coscheduler_work_retries_total"}
    print(f"\n{level}: {seats:g} seats, {throttled:g} of the operator's requests rejected (429); "
          f"its retries by reason since it started: {retries}\n"
          f"time to anchor: {apifaults.spread(anchored)}\n"
          f"gated pods' waits: {apifaults.spread(gated)}")
    assert throttled > 0, "API Priority and Fairness rejected nothing: no fault was made"
    assert s.warnings() == []


def test_a_new_leader_moves_no_anchor_off_a_lost_node_while_a_task_runs_there(
    cluster: LocalCluster, operator: Coscheduler, space: Space
) -> None:
    """Runs anchored on a node, a task of each running there; the node stops heart-beating, and
    the leader is killed once it is NotReady. The next leader starts knowing nothing, finds the
    anchors on a NotReady node, and keeps each where its task runs (a running task is never
    separated from its volume): no balloon pod is deleted."""
    s = space
    pool = faults.make_pool(cluster)
    fleet = Fleet(cluster, operator, standbys=1, name="apifaults-standby")
    blocked = "tekton_coscheduler_anchors_on_unavailable_nodes"
    with PodRecorder(cluster, s.ns) as recorder:
        try:
            fleet.start()
            faults.cordon(cluster, pool.big)  # every anchor on the node that goes
            for run in [s.start(f"held-{i}", nodes=pool.label) for i in range(HELD)]:
                assert s.balloon_node(run) == pool.small
                assert s.pod_node(s.task_pod(run, "build", claims=())) == pool.small
            faults.cordon(cluster, pool.big, on=False)  # where they could go, were they free
            faults.lose(cluster, pool.small)
            cluster.wait_for(lambda: not node_schedulable(s.core.read_node(pool.small)),
                             timeout=60, what=f"{pool.small} NotReady")
            killed = time.time()
            assert fleet.kill_leader() is not None

            def decided() -> bool:
                if any(p.is_balloon and p.deleted for p in recorder.all()):
                    return True
                leader = fleet.leader()
                return leader is not None and leaders.first_leading(
                    apifaults.lines_of(leader), killed) is not None and (
                    leader.metric(blocked) >= HELD)

            cluster.wait_for(decided, timeout=90, what="the new leader keeping every anchor")
        finally:
            fleet.stop_standbys()
            faults.remove_pool(cluster, pool)
            cluster.wait_for(operator.leads, timeout=60, what="the session's replica leads")
    deleted = sorted(p.name for p in recorder.all() if p.is_balloon and p.deleted)
    assert not deleted, f"balloon pods deleted while a task of their run ran there: {deleted}"


@pytest.fixture(scope="module")
def patient(cluster: LocalCluster, operator: Coscheduler, room: dict[str, str]
            ) -> Iterator[Coscheduler]:
    """The operator with a Lease that outlasts the API server's restart (about 6 s away): with
    the suite's 5 s the leader loses it at each restart, and a fresh reconciler starts from
    nothing. A renew deadline of 20 s keeps one reconciler, and its watches, through every
    restart: what the scenarios below are about. Last in the module, and the control plane is
    left current."""
    with apifaults.running(operator, {"COSCHEDULER_LEASE_DURATION": "30"}):
        yield operator
    apifaults.refresh(cluster)
    apifaults.settle(cluster, room)


def test_a_balloon_pod_deleted_as_watches_come_back_leaves_no_ghost(
    cluster: LocalCluster, patient: Coscheduler, space: Space
) -> None:
    """A run on a shared ReadWriteOnce claim is deleted with its balloon right as the API server
    comes back from a restart, in the gap where the watches must list again (410: too old a
    version for the new API server's watch cache). The next run on that claim is anchored, with
    no term towards the balloon that is gone: a ghost in the pod index would give it one, which
    no node can satisfy. The replica is paused across the restart and the deletion, so that the
    deletion is sure to fall in the gap: its watches come back within 2 s of the API server
    (reflector.UNREACHABLE_PAUSE), and three tries of three in a row found them back first."""
    s = space
    node = name_of(s.core.list_node(label_selector=",".join(
        f"{k}={v}" for k, v in s.nodes.items())).items[0])
    s.claim_on(node, "shared")
    first = s.start("first", claim="shared")
    assert s.balloon_node(first) == node
    [sts] = s.balloons(first)
    pids = apifaults.pause(patient)  # well within its Lease's renew deadline (20 s)
    try:
        restarted = time.time()
        apifaults.restart_apiserver(cluster)
        # The balloon and its pod go at once: the garbage collector's watches are coming back
        # too, and would delete them only once they are.
        s.delete_run(first)
        s.apps.delete_namespaced_stateful_set(sts.metadata.name, s.ns)
        s.core.delete_namespaced_pod(f"{sts.metadata.name}-0", s.ns, grace_period_seconds=0)
        deleted = time.time()
    finally:
        apifaults.resume(pids)
    relisted = cluster.wait_for(functools.partial(
        apifaults.relisted, patient, "pods", restarted), timeout=60, what="the pod watch back")
    assert relisted > deleted, "the pod watch was back before the deletion"
    second = s.start("second", claim="shared")
    affinity = s.wait_balloon(second).spec.template.spec.affinity  # None: no term at all
    terms = ((affinity and affinity.pod_affinity) or client.V1PodAffinity()
             ).required_during_scheduling_ignored_during_execution
    towards = [present(present(t.label_selector).match_labels) for t in terms or []]
    assert not [m for m in towards if first["metadata"]["uid"] in m.values()], (
        f"the next run's balloon requires the node of the gone one's: {towards}")
    apifaults.refresh(cluster)
    assert s.balloon_node(second) == node


def test_after_seven_api_server_restarts_the_caches_are_current_within_seconds(
    cluster: LocalCluster, patient: Coscheduler, space: Space
) -> None:
    """Six restarts of the API server, each once the watches have run healthily again, then a
    seventh with runs finishing as it comes back: within 5 s a new run has its balloon (the
    watches are back), within 10 s the finished runs' balloons are gone. A watch's pause grew
    for a process's life before: 30 s after five failures."""
    s = space
    apifaults.refresh(cluster)  # after the restarts of the module's scenario before this one
    ending = [s.start(f"ending-{i}") for i in range(4)]
    cluster.wait_for(lambda: len(s.anchored()) == len(ending), timeout=60, what="runs anchored")
    for i in range(7):
        down = apifaults.restart_apiserver(cluster)
        back = time.time()
        if i == 6:
            for run in ending:
                s.finish(run)
            finished = time.time()
        s.wait_balloon(s.start(f"probe-{i}"), timeout=60)
        current = time.time() - back
        print(f"\nrestart {i + 1}: away {down:.1f} s; a new run's balloon {current:.1f} s after")
        # API servers do not restart back to back: the watches run healthily in between.
        time.sleep(max(0.0, back + reflector.HEALTHY + 1 - time.time()) if i < 6 else 0)
    cluster.wait_for(lambda: not any(s.balloons(r) for r in ending), timeout=60,
                     what="the finished runs' balloons gone")
    gone = time.time() - finished
    print(f"the finished runs' balloons gone {gone:.1f} s after they finished")
    assert current <= 5, f"a new run given its balloon {current:.1f} s after the API server's return"
    assert gone <= 10, f"the finished runs' balloons gone {gone:.1f} s after they finished"
