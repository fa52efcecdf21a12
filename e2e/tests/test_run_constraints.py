"""What the balloon must carry, and runs that share: with real Tekton on a pool of kwok nodes.

Per-task tolerations that replace the run's (the balloon goes only where every task can), a claim
only a pod template mounts, two runs on one ReadWriteOnce claim, opting out mid-run or for one
task, a balloon preempted, and `explain` on what it all left behind.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from controller.core.admission import affinity
from controller.core.basics import names
from e2e.harness import faults
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.faults import Pool
from e2e.harness.runs import Runs

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

TAINT = "e2e.tekton-coscheduler.dev/dedicated"
TOLERATE = {"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}


def two_tasks(name: str, pool: Pool, **kw: Any) -> dict[str, Any]:
    return tr.pipelinerun(name, [tr.task("first"), tr.task("second", after=["first"])],
                          {tr.SHARED: tr.volume_claim_template()},
                          pod_template={"nodeSelector": dict(pool.label), **kw.pop("template", {})},
                          **kw)


def test_a_task_whose_tolerations_replace_the_runs_keeps_the_anchor_off_the_tainted_node(
    runs: Runs, pool: Pool
) -> None:
    """The run tolerates the taint on `big`; its second task's own pod template does not
    (Tekton replaces tolerations, it does not merge them). The balloon must not go to `big`."""
    s = runs
    faults.volumes_across_the_pool(s.cluster, pool)
    faults.taint(s.cluster, pool.big, TAINT)
    faults.cordon(s.cluster, pool.small)  # the only node the run as a whole tolerates is big...
    body = two_tasks(tr.unique("tol"), pool, template={"tolerations": [TOLERATE]})
    # Not `tolerations: []`: Tekton's webhook drops empty fields, so that would inherit the run's.
    other = {"key": "e2e.tekton-coscheduler.dev/other", "operator": "Exists", "effect": "NoSchedule"}
    body["spec"]["taskRunSpecs"] = [{"pipelineTaskName": "second",
                                     "podTemplate": {"tolerations": [other]}}]
    run = s.start(body)
    try:
        time.sleep(8)
        assert s.recorder.first_balloon_node(run["metadata"]["uid"]) is None  # ...but not its tasks
    finally:
        faults.cordon(s.cluster, pool.small, on=False)
    assert s.anchor(run) == pool.small
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert {p.node for p in s.recorder.pods(run["metadata"]["uid"])} == {pool.small}


def test_a_claim_only_the_pod_template_mounts_anchors_the_run_where_its_volume_is(
    runs: Runs, pool: Pool
) -> None:
    s = runs
    s.pvc("cache")
    faults.add_pv(s.cluster, faults.HOSTNAME, pool.big)  # the only volume: on big's own disk
    body = tr.pipelinerun(tr.unique("tplvol"), [tr.task("only", workspaces=())], {},
                          pod_template={"nodeSelector": dict(pool.label), "volumes": [
                              {"name": "cache", "persistentVolumeClaim": {"claimName": "cache"}}]})
    run = s.start(body)
    assert s.anchor(run) == pool.big
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")


def test_two_runs_on_one_read_write_once_claim_share_a_node(runs: Runs, pool: Pool) -> None:
    s = runs
    s.pvc("shared")
    faults.volumes_across_the_pool(s.cluster, pool, count=1)
    first = s.start(tr.pipelinerun(tr.unique("one"), [tr.task("work")],
                                   {tr.SHARED: tr.claim("shared")},
                                   pod_template={"nodeSelector": dict(pool.label)},
                                   annotations={tr.HOLD: "true"}))  # alive until let go below
    node = s.anchor(first)
    # Its pod bound first: a run with no pod on its anchor yet may move off a cordoned node.
    s.recorder.wait_pods(first["metadata"]["uid"], ["work"])
    faults.cordon(s.cluster, node)  # the scheduler alone would now put a second run elsewhere...
    try:
        second = s.start(tr.pipelinerun(tr.unique("two"), [tr.task("work")],
                                        {tr.SHARED: tr.claim("shared")},
                                        pod_template={"nodeSelector": dict(pool.label)}))
        shares = s.said(second, "SharesClaimWithRuns")
        assert first["metadata"]["uid"] in shares.message
        time.sleep(5)
        assert s.recorder.first_balloon_node(second["metadata"]["uid"]) is None  # ...it waits
    finally:
        faults.cordon(s.cluster, node, on=False)
    assert s.anchor(second) == node
    s.release([first], task="work")
    assert [tr.outcome(s.done(r)) for r in (first, second)] == [("True", "Succeeded")] * 2


def test_opting_out_mid_run_or_for_one_task_leaves_no_pod_waiting(runs: Runs, pool: Pool) -> None:
    s = runs
    faults.volumes_across_the_pool(s.cluster, pool)
    body = two_tasks(tr.unique("optout"), pool,
                     task_annotations={"first": {tr.RUN_SECONDS: "6"}})
    body["spec"]["taskRunSpecs"][0]["metadata"]["annotations"][names.OPT_OUT_ANNOTATION] = "false"
    run = s.start(body)
    s.anchor(run)
    s.custom.patch_namespaced_custom_object(
        *tr.TEKTON, s.ns, "pipelineruns", run["metadata"]["name"],
        {"metadata": {"annotations": {names.OPT_OUT_ANNOTATION: "false"}}})
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    pods = {p.task: p for p in s.recorder.pods(run["metadata"]["uid"])}
    assert affinity.balloon_terms(pods["first"].spec) == []  # its own taskRunSpecs opted it out
    # The balloon stayed for the run's end, so no pod pinned to it waited.
    assert s.events("BalloonUnschedulable") == [] and s.events("PodCannotFollowAnchor") == []


def test_a_preempted_balloon_moves_and_says_so(
    cluster: ClusterHandle, runs: Runs, pool: Pool
) -> None:
    """A pod of higher priority that needs `small` whole takes it; the scheduler preempts the
    balloon (budgets do not stop it), its StatefulSet makes a new one, and the anchor follows."""
    s = runs
    faults.volumes_across_the_pool(s.cluster, pool)
    # Anchored where fetch (4 CPUs) cannot fit, as capacity-aware anchoring would not allow.
    s.policy("anchor-alone", {"capacity": {"anchor": False}}, wait=True)
    # Cordoned before the run starts: the balloon is made within milliseconds of the run, and
    # the scheduler would rather take the bigger node.
    faults.cordon(s.cluster, pool.big)
    try:
        run = s.start(faults.pool_pipeline(tr.unique("preempt"), pool, "4"))
        with cluster.api_client() as api:
            client.SchedulingV1Api(api).create_priority_class(
                {"metadata": {"name": f"urgent-{pool.label[faults.POOL]}"}, "value": 1000000})  # type: ignore[arg-type]
        assert s.anchor(run) == pool.small
    finally:
        faults.cordon(s.cluster, pool.big, on=False)
    s.core.create_namespaced_pod(s.ns, {  # type: ignore[arg-type]
        "metadata": {"name": "urgent"},
        "spec": {"priorityClassName": f"urgent-{pool.label[faults.POOL]}",
                 "nodeSelector": {"kubernetes.io/hostname": pool.small},
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": "2"}}}]}})
    moved = s.said(run, "AnchorMoved")
    assert "preempted" in moved.message and f"to node {pool.big}" in moved.message
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")


def test_explain_says_where_the_pods_went_and_what_holds_the_anchor(
    runs: Runs, pool: Pool, coscheduler: Coscheduler
) -> None:
    s = runs
    faults.add_pv(s.cluster, faults.HOSTNAME, pool.small)
    faults.cordon(s.cluster, pool.big)  # before the run: see the test above
    try:
        run = s.start(faults.pool_pipeline(tr.unique("explain"), pool, "100m",
                                           first_seconds="20"))
        assert s.anchor(run) == pool.small
    finally:
        faults.cordon(s.cluster, pool.big, on=False)
    s.recorder.wait_pods(run["metadata"]["uid"], [tr.FETCH])  # fetch runs there for 20 s
    faults.taint(s.cluster, pool.small, TAINT)
    s.said(run, "AnchorNodeUnavailable")
    exe = Path(sys.executable).with_name("tekton-coscheduler")
    out = subprocess.run([str(exe), "explain", f"{s.ns}/{run['metadata']['name']}"],
                         env=coscheduler.env(), capture_output=True, text=True, timeout=60)
    print(out.stdout)
    assert out.returncode == 1, out.stderr  # 1: the run has problems (its node is tainted)
    assert f"anchor: node {pool.small}" in out.stdout
    assert f"node {pool.small} is tainted" in out.stdout
    assert "no (on that node only)" in out.stdout
    assert "AnchorNodeUnavailable" in out.stdout
    faults.untaint(s.cluster, pool.small, TAINT)
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
